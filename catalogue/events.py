"""Product and price events keep the catalogue current, through the same cycle as access.

An event says which product changed; before the transaction its current state is read from
Stripe (the product, every price of it, its Entitlements features), and a price event's own
object stands for that price. Each row written is stamped with the event's `created`: a row
holds a state at least as new as its stamp, so an older event arriving late changes nothing
(`catalogue/writes.py` writes only over an older stamp), and the ledger makes a
redelivery a no-op. An archived price or product is a row with `is_active` false at once:
checkout sells active rows only; purchases keep referring to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from catalogue.rules import Listing, Unreadable, listing, product_of, read_product
from core.events import Event, stripe_id
from core.stripe_objects import StripeProduct

PRODUCT_TYPES = ("product.created", "product.updated", "product.deleted")
PRICE_TYPES = ("price.created", "price.updated", "price.deleted")


@dataclass(frozen=True)
class CatalogueChange:
    """A product or one of its prices changed (`gone`: deleted). `found` is what Stripe holds
    of the product, read before the transaction (None: Stripe no longer has it)."""

    product_id: str | None
    price: Mapping[str, Any] | None = field(default=None, repr=False)  # a price event's
    gone: bool = False
    found: StripeProduct | None = None

    @property
    def needs_stripe(self) -> bool:
        return not self.gone and self.product_id is not None


@dataclass(frozen=True)
class Retirement:
    """Rows no longer sold: of a product (or all, `product` None), optionally only `prices`,
    never those in `keep`."""

    product: str | None
    prices: tuple[str, ...] | None = None
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class CatalogueWrite:
    """Rows to upsert and rows to retire, as of Stripe's `at`."""

    at: datetime
    listings: tuple[Listing, ...] = ()
    retire: Retirement | None = None


def catalogue_change(event: Event) -> CatalogueChange:
    """The change a product or price event calls for."""
    obj = event.object
    gone = event.type.endswith(".deleted")
    if event.type.startswith("price."):
        return CatalogueChange(product_id=product_of(obj), price=obj, gone=gone)
    return CatalogueChange(product_id=stripe_id(obj.get("id")), gone=gone)


def decide(event: Event, change: CatalogueChange) -> tuple[CatalogueWrite, str]:
    """What the change writes, and the outcome the ledger records (it names what is wrong
    with a product that is not sold)."""
    at = event.created
    price_id = stripe_id(change.price.get("id")) if change.price else None
    if change.gone and price_id:
        return CatalogueWrite(at, retire=Retirement(None, prices=(price_id,))), "price retired"
    if change.product_id is None:  # nothing named: never read as "every product"
        return CatalogueWrite(at), "ignored (no product named)"
    if change.found is None:  # deleted, or Stripe no longer has it
        return CatalogueWrite(at, retire=Retirement(change.product_id)), "product retired"
    found = change.found
    try:
        facts = read_product(found.product, found.features, feature_names=found.feature_names)
    except Unreadable as exc:
        retire = Retirement(change.product_id)
        return CatalogueWrite(at, retire=retire), f"product {change.product_id} not sold: {exc}"
    prices = {str(p["id"]): p for p in found.prices}
    if change.price and price_id:
        prices[price_id] = change.price  # the event's own state of its price
    listings: list[Listing] = []
    skipped: list[str] = []
    for pid, price in prices.items():
        try:
            listings.append(listing(facts, price))
        except Unreadable as exc:
            skipped.append(f"price {pid} not sold: {exc}")
    keep = tuple(item.stripe_price_id for item in listings)
    write = CatalogueWrite(at, tuple(listings), Retirement(facts.id, keep=keep))
    sold = sum(item.is_active for item in listings)
    return write, "; ".join([f"catalogue: {sold} price(s) of {facts.id} sold", *skipped])
