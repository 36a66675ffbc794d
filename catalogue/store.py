"""Products in Postgres."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from adapters.db.pool import Connection, Database, Statement

if TYPE_CHECKING:
    from catalogue.rules import EmailProduct

COLUMNS = (
    "id, name, description, price, stripe_price_id, type, billing_type, billing_interval,"
    " is_active, is_featured, github_repo, download_url, trial_days, features, per_seat,"
    " currency, tax_behavior, tax_code, stripe_product_id, credits, credits_period,"
    " feature_names"
)


@dataclass(frozen=True)
class Product:
    id: str
    name: str
    description: str
    price: Decimal
    stripe_price_id: str
    type: str
    billing_type: str
    billing_interval: str | None
    is_active: bool
    is_featured: bool
    github_repo: str | None
    download_url: str | None
    trial_days: int | None = None  # a free trial that checkout offers, in days
    features: tuple[str, ...] = ()  # the feature names holding it grants
    per_seat: bool = False  # priced per seat: a team buys a quantity of it
    currency: str | None = None  # lower-case ISO 4217; None until the catalogue sync reads it
    tax_behavior: str = "unspecified"  # inclusive, exclusive or unspecified, as Stripe says
    tax_code: str | None = None  # its Stripe product's tax code
    stripe_product_id: str | None = None
    credits: dict[str, int] | None = None  # the credits a purchase grants (docs/credits.md)
    credits_period: str | None = None
    feature_names: dict[str, str] | None = None  # key -> Stripe's display name

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Product:
        features = tuple(row.get("features") or ())
        return cls(**{**row, "id": str(row["id"]), "features": features})

    def facts(self) -> EmailProduct:
        """What an e-mail may say of it: the real mails' and the samples' alike."""
        # Here, not at the top: the e-mail modules are not loaded by the API's first request.
        from catalogue.rules import EmailProduct

        return EmailProduct(
            name=self.name,
            type=self.type,
            billing=self.billing_interval or "one_time",
            download_url=self.download_url,
            github_repo=self.github_repo,
            # Each feature as a buyer reads it (its display name, else its key).
            credits_added=tuple(
                ((self.feature_names or {}).get(f) or f, n)
                for f, n in sorted((self.credits or {}).items())
            )
            if self.credits_period == "once"
            else (),
        )


def active_products(db: Database) -> list[Product]:
    """Active products, featured first, then by price."""
    rows = db.fetch_all(
        f"select {COLUMNS} from public.products where is_active"  # noqa: S608 - constant columns
        " order by is_featured desc, price, name"
    )
    return [Product.from_row(row) for row in rows]


def active_by_price(db: Database, price_id: str) -> Product | None:
    """The active product sold at a Stripe price."""
    with db.transaction() as conn:
        return by_price(conn, price_id, active_only=True)


def by_prices_statement(price_ids: Sequence[str]) -> Statement:
    """The products sold at these Stripe prices (active or not), as a statement to read with
    others in one round trip (`Product.from_row` makes each row a product)."""
    query = f"select {COLUMNS} from public.products where stripe_price_id = any(%s)"  # noqa: S608
    return Statement(query, (list(price_ids),))


def by_price(conn: Connection, price_id: str, *, active_only: bool = False) -> Product | None:
    """The product sold at a Stripe price, inside a caller's transaction."""
    row = conn.execute(
        f"select {COLUMNS} from public.products where stripe_price_id = %s"  # noqa: S608
        " and (is_active or not %s)",
        (price_id, active_only),
    ).fetchone()
    return Product.from_row(row) if row else None
