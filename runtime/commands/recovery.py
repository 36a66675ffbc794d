"""`flask --app main events reconcile | replay-dead-letters`: recover lost or abandoned events.

Plain commands (the `events` group in `runtime/commands/events.py` adds them), each in the
application context as `flask` commands expect.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click
from flask import current_app
from flask.cli import with_appcontext

from core.errors import InvalidRequest
from events import recovery as event_recovery
from runtime.container import Container


def _container() -> Container:
    found: Container = current_app.extensions["container"]
    return found


# With the in-process bus the subscribers run in this very process: it must not exit before
# they have applied what it republished.
INLINE_WAIT_SECONDS = 60.0


@click.command("reconcile")
@click.option("--since", default="72h", show_default=True, help="How far back: 90m, 72h, 7d.")
@click.option("--dry-run", is_flag=True, help="List what is missing; republish nothing.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0, max=3600),
    default=None,
    help="Seconds to wait until the ledger shows each republished event applied (default: 60"
    " with the in-process bus; with Pub/Sub, only until each publish is confirmed).",
)
@with_appcontext
def reconcile_command(since: str, dry_run: bool, wait: float | None) -> None:
    """Republish Stripe's events (of our types) that the ledger has no record of; exit 1 when
    one was not republished, or not applied within --wait."""
    try:
        span = event_recovery.parse_since(since)
    except InvalidRequest as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from exc
    c = _container()
    if wait is None and c.settings.event_bus == "inline":
        wait = INLINE_WAIT_SECONDS
    try:
        event_recovery.reconcile(
            stripe=c.stripe,
            db=c.db,
            bus=c.bus,
            since=datetime.now(UTC) - span,
            dry_run=dry_run,
            report=click.echo,
            wait=wait,
        )
    except event_recovery.RecoveryIncomplete as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("replay-dead-letters")
@click.option("--dry-run", is_flag=True, help="List the dead letters; leave them in place.")
@with_appcontext
def replay_dead_letters_command(dry_run: bool) -> None:
    """Republish what the dead-letter subscription holds (EVENT_BUS=pubsub)."""
    from adapters.bus.dead_letters import dead_letter_box

    c = _container()
    s = c.settings
    if s.event_bus != "pubsub":
        raise click.UsageError(
            "dead letters live in Pub/Sub: set EVENT_BUS=pubsub (the in-process bus logs them)"
        )
    with dead_letter_box(
        project=s.google_cloud_project, topic=s.pubsub_topic, emulator_host=s.pubsub_emulator_host
    ) as box:
        try:
            event_recovery.replay_dead_letters(
                box=box, bus=c.bus, dry_run=dry_run, report=click.echo
            )
        except event_recovery.RecoveryIncomplete as exc:
            raise click.ClickException(str(exc)) from exc
