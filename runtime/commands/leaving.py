"""`flask account-deletions resume`: finish every account deletion a crash or an outage left
half-done (each step not done yet, in order; docs/leaving.md). It runs where the access
target's keys are: Supabase's secret key deletes the Auth user."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from accounts import leaving
from accounts.leaving import Outcome
from runtime.container import Container

account_deletions = AppGroup("account-deletions", help="Account deletions under way.")


@account_deletions.command("resume")
def resume_command() -> None:
    """Finish the deletions not finished yet; exits non-zero while one could not go on."""
    container: Container = current_app.extensions["container"]
    outcomes = leaving.resume_all(deps=container.leaving)
    failed = 0
    for outcome in outcomes:
        if isinstance(outcome, Outcome):
            left = ", ".join(outcome.remaining) or "nothing"
            click.echo(f"{outcome.deletion_id}: left to do: {left}")
        else:
            failed += 1
            click.echo(f"stopped: {outcome}", err=True)
    click.echo(f"{len(outcomes)} deletion(s) under way, {failed} stopped")
    if failed:
        raise SystemExit(1)
