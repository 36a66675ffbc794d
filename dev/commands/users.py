"""`flask --app main users create|id|token|admin|show EMAIL`: local users and development
tokens."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import click
from flask import current_app
from flask.cli import AppGroup

from access.announcements import about
from core.errors import ServiceError
from dev import local_users
from runtime.container import Container


@click.group("users", cls=AppGroup)
def users() -> None:
    """Local users and development access tokens (refused with APP_ENV=production)."""


@users.command("create")
@click.argument("email")
@click.option("--name", default=None, help="Full name, as sign-up would store it.")
@click.option(
    "--password",
    default=None,
    help="Set (or replace) the password signing in through make run's Auth stand-in takes.",
)
def create_command(email: str, name: str | None, password: str | None) -> None:
    """Create a user (auth user and profile) with EMAIL; an existing one is kept."""
    with _refusals() as c:
        profile, created = local_users.create(
            email=email, name=name, password=password, db=c.db, settings=c.settings
        )
    click.echo(f"{'created' if created else 'exists:'} {profile.email} (id {profile.id})")


@users.command("id")
@click.argument("email")
def id_command(email: str) -> None:
    """Print the id of the user with EMAIL: `events send ... --user "$(...)"` buys signed in."""
    with _refusals() as c:
        click.echo(local_users.user_id(email=email, db=c.db, settings=c.settings))


@users.command("token")
@click.argument("email")
@click.option("--ttl", default=3600, show_default=True, help="Seconds until it expires.")
@click.option(
    "--aal2", "aal2", is_flag=True, help="As after a second factor (the support API asks it)."
)
def token_command(email: str, ttl: int, aal2: bool) -> None:
    """Print an access token for EMAIL: `curl -H "Authorization: Bearer $(...)"`."""
    with _refusals() as c:
        click.echo(
            local_users.token(
                email=email, ttl=ttl, db=c.db, settings=c.settings, second_factor=aal2
            )
        )


@users.command("admin")
@click.argument("email")
def admin_command(email: str) -> None:
    """Make the user with EMAIL an admin: the support API (/api/admin) answers them."""
    with _refusals() as c:
        profile = local_users.make_admin(email=email, db=c.db, settings=c.settings)
    click.echo(f"admin: {profile.email} (id {profile.id})")


@users.command("show")
@click.argument("email")
def show_command(email: str) -> None:
    """Profile, access, purchases and e-mails sent for EMAIL."""
    with _refusals() as c:
        found = local_users.summary(email=email, db=c.db, settings=c.settings)
    p = found.profile
    click.echo(f"user        {p.email} (id {p.id}){' admin' if p.is_admin else ''}")
    click.echo(f"has_access  {str(p.has_access).lower()}")
    click.echo(f"customer    {p.customer_id or '-'}  price {p.price_id or '-'}")
    _rows(
        "purchases", [(r["created_at"], f"{r['product']} {r['session']}") for r in found.purchases]
    )
    # The key a mail was sent under names what it was about: `checkout cs_...`, `event evt_...`.
    _rows(
        "e-mails", [(r["sent_at"], f"{r['kind']} for {about(r['event_id'])}") for r in found.emails]
    )


def _rows(title: str, rows: list[tuple[datetime, str]]) -> None:
    click.echo(f"{title:<11} {len(rows)}")
    for when, line in rows:
        click.echo(f"  {when:%Y-%m-%d %H:%M:%S}  {line}")


@contextmanager
def _refusals() -> Iterator[Container]:
    """The app's container; a refusal becomes a one-line error and exit status 1."""
    container: Container = current_app.extensions["container"]
    try:
        yield container
    except ServiceError as exc:
        raise click.ClickException(exc.message) from exc
