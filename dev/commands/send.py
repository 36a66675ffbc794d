"""`flask --app main events send TYPE`: a signed Stripe-shaped sample posted to a webhook."""

from __future__ import annotations

import time

import click
from flask import current_app
from flask.cli import with_appcontext

from dev.samples import send as samples
from dev.samples.events import (
    API_VERSION,
    API_VERSIONS,
    DEFAULT_EMAIL,
    DEFAULT_PRICE,
    SAMPLE_TYPES,
    VARIANTS,
    Facts,
    variant_of,
)
from runtime.container import Container


@click.command("send")
@click.argument("event_type", metavar="TYPE", type=click.Choice(SAMPLE_TYPES))
@click.option("--email", default=DEFAULT_EMAIL, show_default=True, help="The buyer's e-mail.")
@click.option(
    "--customer",
    default=None,
    help="Stripe customer id [default: derived from --email, so that later events for the"
    " same e-mail name the customer its checkout linked].",
)
@click.option(
    "--price",
    default=DEFAULT_PRICE,
    show_default=True,
    help="Stripe price id; a product sold at it gives the amount and the mode (a one-time"
    " product: a payment checkout, a lifetime purchase).",
)
@click.option(
    "--variant",
    default=None,
    help="A situation of TYPE: "
    + "; ".join(f"{t}: {', '.join(sorted(v))}" for t, v in sorted(VARIANTS.items()))
    + ".",
)
@click.option("--user", "user_id", default=None, help="User id for client_reference_id.")
@click.option("--session", default=None, help="Checkout session id [default: a new one].")
@click.option(
    "--team",
    "team_id",
    default=None,
    help="A team's id: the event is about the team's purchase (its checkout names the team;"
    " its customer is the team's, derived from the id unless --customer is given).",
)
@click.option(
    "--quantity",
    type=click.IntRange(1, 10_000),
    default=1,
    show_default=True,
    help="The subscription's quantity: a team's seats on a per-seat price.",
)
@click.option("--created", type=int, default=None, help="The event's Unix time [default: now].")
@click.option(
    "--url",
    default=None,
    help="The webhook [default: http://localhost:$PORT/api/webhook/payments].",
)
@click.option(
    "--api-version",
    type=click.Choice(API_VERSIONS),
    default=API_VERSION,
    show_default=True,
    help="The Stripe API version whose shapes the event takes.",
)
@with_appcontext
def send_command(
    event_type: str,
    email: str,
    customer: str | None,
    price: str,
    user_id: str | None,
    session: str | None,
    team_id: str | None,
    quantity: int,
    created: int | None,
    url: str | None,
    api_version: str,
    variant: str | None,
) -> None:
    """Send a Stripe-shaped TYPE event, signed with the webhook secret."""
    container = _container()
    settings = container.settings
    if variant is not None:
        try:
            variant_of(event_type, variant)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--variant") from None
    facts = Facts(
        email=email,
        customer=customer,
        price=price,
        user_id=user_id,
        session=session,
        team_id=team_id,
        quantity=quantity,
    )
    delivery = samples.send(
        event_type=event_type,
        facts=samples.product_facts(facts, db=container.db),
        variant=variant,
        created=created if created is not None else int(time.time()),
        url=url or f"http://localhost:{settings.port}/api/webhook/payments",
        secret=settings.webhook_secret,
        api_version=api_version,
    )
    click.echo(f"{delivery.event_type} {delivery.event_id} -> {delivery.status} {delivery.body}")
    if not delivery.ok:
        raise click.ClickException(f"the webhook answered {delivery.status}")


def _container() -> Container:
    found: Container = current_app.extensions["container"]
    return found
