"""`flask --app main credits report`: announce again the overages not reported to Stripe's
meter (an announcement lost between a consumption's commit and the bus), for the access
target to report once each, and the automatic top-ups claimed and not charged (their
announcement lost), for it to charge once each. Safe to run any time: a report goes once per
consumption key, a top-up's charge once per claim."""

from __future__ import annotations

from datetime import UTC, datetime

import click
from flask import current_app
from flask.cli import AppGroup

from credits import store as credits
from credits.rules import overage_recorded, top_up_claimed
from runtime.container import Container


@click.group("credits", cls=AppGroup)
def credits_group() -> None:
    """Credits and usage: report overages to Stripe's meters."""


# Longer than any request runs (Cloud Run's longest request timeout is an hour): a reservation
# still unsettled after it was left by a request that died between reserving and settling.
STALE_RESERVATION_SECONDS = 2 * 3600


@credits_group.command("report")
@click.option(
    "--older-than",
    default=300,
    show_default=True,
    type=click.IntRange(min=0),
    help="Seconds since the consumption: newer ones are still on their way.",
)
def report_command(older_than: int) -> None:
    """Release the reservations left by requests that died, and announce each unreported
    overage again (the reporter sends each once)."""
    c: Container = current_app.extensions["container"]
    released = credits.release_stale(c.db, older_than_seconds=STALE_RESERVATION_SECONDS)
    if released:
        click.echo(f"released {len(released)} reservation(s) left unsettled")
    keys = credits.unreported(c.db, older_than_seconds=older_than)
    for key in keys:
        event, data = overage_recorded(key, datetime.now(UTC))
        c.bus.publish(event, data)
    claims = credits.unannounced_top_ups(c.db, older_than_seconds=older_than)
    for claim in claims:
        event, data = top_up_claimed(
            claim["account_id"], claim["feature"], int(claim["crossings"]), datetime.now(UTC)
        )
        c.bus.publish(event, data)
    c.bus.drain(30)
    click.echo(f"announced {len(keys)} unreported overage(s)")
    if claims:
        click.echo(f"announced {len(claims)} automatic top-up(s) claimed and not charged")
