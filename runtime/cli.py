"""Flask CLI commands: `flask --app main migrate`, `seed`, and the groups in `commands/`."""

from __future__ import annotations

import click
from flask import Flask, current_app

from adapters.db import migrations, products
from runtime.commands.events import events
from runtime.commands.users import users
from runtime.container import Container


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
    for command in (migrate_command, seed_command, events, users):
        app.cli.add_command(command)
