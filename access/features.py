"""Named features: what a person may use, and Stripe's own view of a customer's.

A product grants the features the catalogue recorded on it (lowercase slugs); a repository
product also grants `github:<owner>/<repo>`. Who holds which is derived where it is read, in
Postgres (`public.features_of`, supabase/migrations), from the active grants the access cycle
writes; this module only reads Stripe's summary and compares.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.events import Event, stripe_id

SUMMARY_UPDATED = "entitlements.active_entitlement_summary.updated"
# The implicit feature of a repository product: a namespace no catalogue slug can fall in.
REPOSITORY_PREFIX = "github:"


@dataclass(frozen=True)
class Summary:
    """Stripe's active entitlements of a customer: the lookup keys of their features."""

    customer_id: str | None
    features: frozenset[str]
    complete: bool  # False: Stripe's list was cut short (`has_more`), nothing can be compared


def summary_from(event: Event) -> Summary:
    obj = event.object
    listed = obj.get("entitlements")
    items = listed.get("data") if isinstance(listed, dict) else None
    keys = {
        item["lookup_key"]
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and isinstance(item.get("lookup_key"), str)
    }
    complete = isinstance(listed, dict) and isinstance(items, list) and not listed.get("has_more")
    return Summary(stripe_id(obj.get("customer")), frozenset(keys), complete)


@dataclass(frozen=True)
class Disagreement:
    customer_id: str
    stripe: list[str]
    ours: list[str]


def disagreement(summary: Summary, ours: Iterable[str]) -> Disagreement | None:
    """Where Stripe's features of a customer differ from the ones derived here, or None.

    `ours` are the features of the customer's active subscriptions (Stripe provisions
    entitlements for subscriptions only), and repository features are not Stripe's to know.
    An empty summary says nothing: a catalogue that reads features from product metadata has
    none in Stripe.
    """
    if summary.customer_id is None or not summary.complete or not summary.features:
        return None
    mine = {name for name in ours if not name.startswith(REPOSITORY_PREFIX)}
    if mine == set(summary.features):
        return None
    return Disagreement(summary.customer_id, sorted(summary.features), sorted(mine))
