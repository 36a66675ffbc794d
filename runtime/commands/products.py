"""`flask --app main products sync`: the catalogue read from Stripe into `public.products`."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from catalogue.service import sync
from runtime.container import Container


@click.group("products", cls=AppGroup)
def products() -> None:
    """The catalogue: synced from Stripe's products and prices."""


@products.command("sync")
def sync_command() -> None:
    """Read every active product and price from Stripe and upsert one row per price; a price
    or product Stripe no longer sells becomes inactive. A product whose metadata cannot be read
    is logged with what is wrong and not sold (under CHECKOUT_TAX=managed_payments, one
    without a tax code too)."""
    echo_sync()


def echo_sync() -> None:
    container: Container = current_app.extensions["container"]
    needs = container.settings.products_need_tax_code
    synced = sync(container.db, container.stripe, needs_tax_code=needs)
    for problem in synced.problems:
        click.echo(f"not sold: {problem}", err=True)
    click.echo(f"catalogue synced from Stripe: {synced.sold} price(s)")
