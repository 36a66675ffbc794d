"""`flask --app main events ...`: Stripe events on the bus: reconcile, replay dead letters, print
the subscriptions' filters. (`events send`, local only, is added from dev/commands/.)"""

from __future__ import annotations

import click
from flask.cli import AppGroup

from runtime.commands.recovery import reconcile_command, replay_dead_letters_command
from runtime.consumers import filter_lines


@click.group("events", cls=AppGroup)
def events() -> None:
    """Stripe events: reconcile with Stripe; replay dead letters; the subscriptions' filters;
    locally, signed samples (`send`)."""


events.add_command(reconcile_command)
events.add_command(replay_dead_letters_command)


@events.command("filters")
def filters_command() -> None:
    """Print each subscriber's Pub/Sub filter, `<subscriber> <filter>` a line, as derived from
    the event types it acts on: those the deploy creates the subscriptions with."""
    for line in filter_lines():
        click.echo(line)
