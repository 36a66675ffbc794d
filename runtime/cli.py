"""Flask CLI commands: `flask --app main migrate`, `seed`, and the groups in `commands/`.

Every command stops with one line naming what is missing, never a traceback, when a setting
it needs is not given (`one_line_errors`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click
from flask import Flask, current_app

from adapters.db import migrations, products
from adapters.github_api import GitHubNotConfigured
from adapters.stripe_api import PaymentsNotConfigured
from runtime.commands.events import events
from runtime.container import Container, MissingSetting
from services.errors import NotConfigured

# What a command raises when a setting it needs is not given: each says which one.
MISSING_SETTING = (MissingSetting, NotConfigured, PaymentsNotConfigured, GitHubNotConfigured)


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
def seed_command() -> None:
    """Insert the three demo products when the products table is empty."""
    count = products.seed_demo_products(_container().db)
    click.echo(f"seeded {count} demo product(s)")


def register(app: Flask) -> None:
    """Add the commands to the app's CLI."""
    for command in (migrate_command, seed_command, events):
        app.cli.add_command(command)
    one_line_errors(app.cli)


def one_line_errors(command: click.Command) -> None:
    """Make `command` and every command under it end with one line (click's `Error: ...`, exit
    status 1) when a setting it needs is missing. Idempotent: apps share the command objects."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            one_line_errors(sub)
    callback = command.callback
    if callback is not None and not getattr(callback, "one_line_errors", False):
        command.callback = _one_line(callback)


def _one_line(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except MISSING_SETTING as exc:
            raise click.ClickException(str(exc)) from None

    run.one_line_errors = True  # type: ignore[attr-defined]
    return run
