"""The catalogue synced from Stripe: every active product and price read, the rows upserted,
and the rows Stripe no longer sells made inactive (never deleted: purchases refer to them)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from adapters.db.pool import Database
from adapters.stripe_api import StripeGateway
from catalogue import writes as store
from catalogue.events import CatalogueWrite, Retirement
from catalogue.rules import catalogue_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Synced:
    sold: int  # prices on sale
    problems: tuple[str, ...]  # the products and prices left out, and why


def sync(db: Database, stripe: StripeGateway, *, needs_tax_code: bool = False) -> Synced:
    """Read Stripe's catalogue and make the table say the same. The rows are stamped with the
    time the read began: an event created after it still applies, an older one does not.
    `needs_tax_code` (CHECKOUT_TAX=managed_payments): a product without a tax code is not
    sold, and named among the problems."""
    at = datetime.now(UTC)
    products, prices = stripe.active_catalogue()
    read = {str(p["id"]): stripe.product_features(str(p["id"])) for p in products}
    features = {pid: keys for pid, (keys, _) in read.items()}
    names = {pid: shown for pid, (_, shown) in read.items()}
    found = catalogue_of(
        products, prices, features, needs_tax_code=needs_tax_code, feature_names=names
    )
    for problem in found.problems:
        log.warning("catalogue: %s", problem)
    keep = tuple(item.stripe_price_id for item in found.listings)
    store.save(db, CatalogueWrite(at, found.listings, Retirement(None, keep=keep)))
    return Synced(sold=len(found.listings), problems=found.problems)
