"""Flask CLI commands: `flask --app main migrate`, `seed`, and the groups in `commands/`.

A setting that is missing or wrong ends a command with one line per problem (click's
`Error: ...`, exit status 1), never a traceback: whether the settings themselves cannot be read
(`one_line_errors` around building the app, in `main.create_app`) or a command needs one that
is not set (DATABASE_URL, STRIPE_SECRET_KEY: `guarded` around every command registered here).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from adapters.db import migrations
from config import MissingSetting, SettingsError
from core.errors import NotConfigured
from runtime.commands.credits import credits_group
from runtime.commands.events import events
from runtime.commands.leaving import account_deletions
from runtime.commands.products import echo_sync, products
from runtime.container import Container


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Inside a click command, turn a settings problem into click's one-line error; outside
    one (gunicorn, a test), let it propagate as it is."""
    try:
        yield
    except (SettingsError, MissingSetting, NotConfigured) as exc:
        if click.get_current_context(silent=True) is None:
            raise
        raise click.ClickException(str(exc)) from None


def guarded(command: click.Command) -> click.Command:
    """`command` (a group: each of its subcommands too), ending in one line for a settings
    problem. Idempotent: every app the process builds shares the command objects."""
    if getattr(command, "guarded", False):
        return command
    invoke = command.invoke

    def invoke_guarded(ctx: click.Context) -> Any:
        with one_line_errors():
            return invoke(ctx)

    # Wrapping the instance keeps each command's own class (Flask's AppGroup, click's Group).
    command.invoke = invoke_guarded  # type: ignore[method-assign]
    command.guarded = True  # type: ignore[attr-defined]
    return command


def _container() -> Container:
    found: Container = current_app.extensions["container"]
    return found


@click.command("migrate")
def migrate_command() -> None:
    """Apply the migrations under supabase/migrations that are not applied yet."""
    c = _container()
    applied = migrations.apply_all(
        c.database_url(), allow_auth_stand_in=not c.settings.is_production
    )
    click.echo(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none needed'}")


@click.command("seed")
@with_appcontext
def seed_command() -> None:
    """The catalogue synced from Stripe, as `products sync` does (locally: the Stripe stand-in's
    demo products)."""
    echo_sync()


# Guarded once, when this module is first imported (every app the process builds shares them).
COMMANDS = tuple(
    guarded(command)
    for command in (
        migrate_command,
        seed_command,
        events,
        products,
        account_deletions,
        credits_group,
    )
)


def register(app: Flask) -> None:
    """Add the commands to the app's CLI."""
    for command in COMMANDS:
        app.cli.add_command(command)
