"""The catalogue's writes: rows upserted and rows retired, each only over an older state.

`synced_at` is the Stripe time of the state a row holds; a write as of an older time leaves the
row as it is. The sync and the access cycle (product and price events) write through here, each
inside its own transaction, a write after the one before it (so two states of one price in a
batch land in order).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adapters.db.pool import Database, Statement
from catalogue.events import CatalogueWrite
from catalogue.rules import Listing

_FIELDS = (
    "stripe_price_id text, stripe_product_id text, name text, description text,"
    " price numeric, type text, billing_type text, billing_interval text, trial_days int,"
    " is_active bool, is_featured bool, github_repo text, download_url text, features text[],"
    " per_seat bool, synced_at timestamptz, currency text, tax_behavior text, tax_code text,"
    " credits jsonb, credits_period text, credits_expire_days int, meter text,"
    " feature_names jsonb, overage_cap int, top_up bool"
)
_NAMES = (
    "stripe_price_id, stripe_product_id, name, description, price, type, billing_type,"
    " billing_interval, trial_days, is_active, is_featured, github_repo, download_url,"
    " features, per_seat, synced_at, currency, tax_behavior, tax_code, credits,"
    " credits_period, credits_expire_days, meter, feature_names, overage_cap, top_up"
)
_UPDATED = ", ".join(f"{n} = excluded.{n}" for n in _NAMES.split(", ")[1:])
UPSERT = (
    f"insert into public.products as p ({_NAMES})"  # noqa: S608 - constant names
    f" select {_NAMES} from jsonb_to_recordset(%s::jsonb) as v({_FIELDS})"
    f" on conflict (stripe_price_id) do update set {_UPDATED}"
    " where p.synced_at is null or p.synced_at < excluded.synced_at"
)
RETIRE = (
    "update public.products p set is_active = false, synced_at = %(at)s"
    " where p.is_active and (p.synced_at is null or p.synced_at < %(at)s)"
    " and (%(product)s::text is null or p.stripe_product_id = %(product)s)"
    " and (%(prices)s::text[] is null or p.stripe_price_id = any(%(prices)s))"
    " and not p.stripe_price_id = any(%(keep)s::text[])"
)


def statements(writes: Sequence[CatalogueWrite]) -> list[Statement]:
    """The writes in order (oldest first), each its upsert and its retirement."""
    found: list[Statement] = []
    for write in sorted(writes, key=lambda w: w.at):
        if write.listings:
            rows = {item.stripe_price_id: _row(item, write) for item in write.listings}
            found.append(Statement(UPSERT, (json.dumps(list(rows.values())),)))
        if write.retire is not None:
            retire = write.retire
            params = {
                "at": write.at,
                "product": retire.product,
                "prices": list(retire.prices) if retire.prices is not None else None,
                "keep": list(retire.keep),
            }
            found.append(Statement(RETIRE, params))
    return found


def save(db: Database, write: CatalogueWrite) -> int:
    """One write in a transaction of its own (the sync's); how many rows it changed (a row
    already holding this state or a newer one is not changed)."""
    changed = 0
    with db.transaction() as conn:
        for statement in statements([write]):
            changed += max(conn.execute(statement.query, statement.params).rowcount, 0)
    return changed


def _row(item: Listing, write: CatalogueWrite) -> dict[str, Any]:
    return {
        "stripe_price_id": item.stripe_price_id,
        "stripe_product_id": item.stripe_product_id,
        "name": item.name,
        "description": item.description,
        "price": str(item.price),
        "type": item.type,
        "billing_type": item.billing_type,
        "billing_interval": item.billing_interval,
        "trial_days": item.trial_days,
        "is_active": item.is_active,
        "is_featured": item.is_featured,
        "github_repo": item.github_repo,
        "download_url": item.download_url,
        "features": list(item.features),
        "per_seat": item.per_seat,
        "synced_at": write.at.isoformat(),
        "currency": item.currency,
        "tax_behavior": item.tax_behavior,
        "tax_code": item.tax_code,
        "credits": dict(item.credits),
        "credits_period": item.credits_period,
        "credits_expire_days": item.credits_expire_days,
        "meter": item.meter,
        "feature_names": dict(item.feature_names),
        "overage_cap": item.overage_cap,
        "top_up": item.top_up,
    }
