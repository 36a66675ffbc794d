"""The access cycle's store: a batch of events in two round trips to Postgres.

The first (`claim_and_read`, sent with BEGIN) is one call of `public.access_claim`: it claims
the events in the ledger, locks the accounts they are about with their grants, and reads them,
with the purchases refunds name and what redeliveries need; `public.revenue_read` then reads
the revenue metrics' levels of the subscriptions named. The second (`write`, sent with
COMMIT) is one statement that writes everything the batch decided (`access.decide`) and
settles the ledger. Supabase is an internet hop away: each round trip costs more than the
statements do. The baseline migration defines the function.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from access import entitlements_store as entitlements
from access.changes import key
from access.checkouts import AccessChange
from access.decide import CancellationRecord, Pending, Plan, PurchaseRecord, RefundRecord
from access.entitlements import Entitlement
from access.model import Account, Purchase, State
from access.revenue import CataloguePrice, Level, Movement
from adapters.db.pool import Statement
from credits import store as credits

# The revenue metrics' levels are read after the claim has taken the accounts' locks (the
# subquery runs first; `revenue_read`, a plpgsql function, reads with a snapshot of its own):
# a level another transaction wrote while this one waited is seen.
CLAIM = (
    "select c.read, public.revenue_read(%(subscriptions)s::text[], %(prices)s::text[])"
    " as revenue from (select public.access_claim(%(consumer)s, %(ids)s::text[],"
    " %(types)s::text[], %(created)s::timestamptz[], %(keys)s::jsonb) as read offset 0) c"
)
_ACCOUNT_DATES = ("access_changed_at", "price_changed_at", "created_at")
_ENTITLEMENT_DATES = ("current_period_end", "trial_end", "ended_at", "changed_at")


def claim_and_read(consumer: str, batch: Sequence[Pending]) -> Statement:
    """Claim these events, lock the accounts of those claimed now with their grants, and read
    the accounts of the others as committed."""
    keys = [
        {
            "event": p.event.id,
            "customer": k.customer_id,
            "user": k.user_id,
            "email": k.email,
            "intent": k.payment_intent,
            "account": k.account_id,
        }
        for p in batch
        for k in map(key, p.changes)
    ]
    snapshots = [
        c.revenue for p in batch for c in p.changes if isinstance(c, AccessChange) and c.revenue
    ]
    prices = {
        i.price_id
        for snap in snapshots
        for i in snap.items
        if i.price_id and (i.unit_amount is None or i.interval is None)
    }
    return Statement(
        CLAIM,
        {
            "subscriptions": sorted({snap.subscription_id for snap in snapshots}),
            "prices": sorted(prices),
            "consumer": consumer,
            "ids": [p.event.id for p in batch],
            "types": [p.event.type for p in batch],
            "created": [p.event.created for p in batch],
            "keys": json.dumps(keys),
        },
    )


def parse(answer: Mapping[str, Any] | None) -> State:
    if answer is None or not isinstance(answer.get("read"), Mapping):
        raise RuntimeError("access_claim answered nothing")
    row = answer["read"]
    accounts = [_account(a) for a in row["accounts"]]
    held: dict[str, list[Entitlement]] = {a.id: [] for a in accounts}
    for found in row["held"]:
        entitlement = _entitlement(found)
        held.setdefault(entitlement.account_id, []).append(entitlement)
    purchases: dict[str, Purchase] = {}
    for found in row["purchases"]:  # oldest first: the first paid with an intent is its own
        intent = found.pop("intent")
        purchases.setdefault(intent, Purchase(**found))
    return State(
        claimed=set(row["claimed"]),
        accounts=accounts,
        held=held,
        purchases=purchases,
        recorded=dict(row["recorded"]),
        known=[_account(a) for a in row["known"]],
        erased=frozenset(row.get("erased") or ()),
        **_revenue(answer.get("revenue")),
    )


def _revenue(found: Any) -> dict[str, Any]:
    found = found if isinstance(found, Mapping) else {}
    levels = {
        r["subscription_id"]: Level(
            r["currency"], int(r["amount"]), datetime.fromisoformat(r["at"]), int(r["rank"])
        )
        for r in found.get("levels") or ()
    }
    prices = {
        r["price_id"]: CataloguePrice(Decimal(str(r["price"])), r["interval"], r["currency"])
        for r in found.get("prices") or ()
    }
    return {"levels": levels, "prices": prices}


# Each writer below touches rows no other one does: they run as one statement.
_UPSERT_GRANTS = entitlements.UPSERT
_SAVE_ACCOUNTS = (
    "update public.accounts a set has_access = v.has_access,"
    " access_changed_at = v.access_changed_at,"
    " access_event_id = coalesce(v.access_event_id, a.access_event_id),"
    " price_id = v.price_id, price_changed_at = v.price_changed_at,"
    " customer_id = coalesce(v.customer_id, a.customer_id)"
    " from unnest(%s::uuid[], %s::bool[], %s::timestamptz[], %s::text[], %s::text[],"
    " %s::timestamptz[], %s::text[]) as v(id, has_access, access_changed_at, access_event_id,"
    " price_id, price_changed_at, customer_id) where a.id = v.id"
)
# The spec's columns on the profile mirror the person's own account.
_MIRROR_PROFILES = _SAVE_ACCOUNTS.replace("public.accounts a", "public.profiles a")
_RECORD_PURCHASES = (
    "insert into public.purchases (user_id, account_id, product_id, stripe_checkout_session_id,"
    " stripe_customer_id, customer_email, amount_total, currency, paid, stripe_payment_intent_id,"
    " quantity)"
    " select v.user_id, v.account_id,"
    " (select pr.id from public.products pr where pr.stripe_price_id = v.price_id),"
    " v.session, v.customer, v.email, v.amount, v.currency, v.paid, v.intent, v.quantity"
    " from unnest(%s::uuid[], %s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[],"
    " %s::bigint[], %s::text[], %s::bool[], %s::text[], %s::int[]) as v(user_id, account_id,"
    " price_id, session, customer, email, amount, currency, paid, intent, quantity)"
    # A purchase is recorded once; its payment, when it comes later, marks it paid.
    " on conflict (stripe_checkout_session_id) do update set paid = true,"
    " stripe_payment_intent_id = coalesce(public.purchases.stripe_payment_intent_id,"
    " excluded.stripe_payment_intent_id),"
    " quantity = coalesce(public.purchases.quantity, excluded.quantity)"
    " where excluded.paid and not public.purchases.paid"
)
_RECORD_REFUNDS = (
    "update public.purchases p set amount_refunded = greatest(p.amount_refunded, v.amount),"
    " refunded_at = coalesce(p.refunded_at, v.refunded_at)"
    " from unnest(%s::uuid[], %s::bigint[], %s::timestamptz[]) as v(id, amount, refunded_at)"
    " where p.id = v.id"
)
_RECORD_DISPUTES = (
    "insert into public.disputes (id, charge_id, payment_intent_id, amount, currency, reason,"
    " status, opened_at) select * from unnest(%s::text[], %s::text[], %s::text[], %s::bigint[],"
    " %s::text[], %s::text[], %s::text[], %s::timestamptz[]) on conflict (id) do nothing"
)
_SETTLE = (
    "update public.processed_events p set outcome = v.outcome"
    " from unnest(%s::text[], %s::text[]) as v(event_id, outcome)"
    " where p.consumer = %s and p.event_id = v.event_id"
)
# A team's seats follow its subscription's quantity (a trigger gives them out again), the
# newest Stripe said: an older one, delivered late, changes nothing.
_SET_QUANTITIES = (
    "update public.teams t set quantity = v.quantity, quantity_changed_at = v.at"
    " from unnest(%s::uuid[], %s::int[], %s::timestamptz[]) as v(id, quantity, at)"
    " where t.id = v.id and (t.quantity_changed_at is null or t.quantity_changed_at < v.at)"
)
# A customer seen first is recorded as its account's, once: nothing moves it afterwards.
_LINK_CUSTOMERS = (
    "insert into public.stripe_customers (customer_id, account_id)"
    " select * from unnest(%s::text[], %s::uuid[]) on conflict (customer_id) do nothing"
)
# The revenue metrics, written with the access change they come from.
_RECORD_MOVEMENTS = (
    "insert into public.mrr_movements (event_id, subscription_id, account_id, currency, delta,"
    " kind, at) select * from unnest(%s::text[], %s::text[], %s::uuid[], %s::text[],"
    " %s::bigint[], %s::text[], %s::timestamptz[]) on conflict (event_id) do nothing"
)
_SET_LEVELS = (
    "insert into public.mrr_levels as l (subscription_id, account_id, currency, amount, at,"
    " rank, event_id) select * from unnest(%s::text[], %s::uuid[], %s::text[], %s::bigint[],"
    " %s::timestamptz[], %s::smallint[], %s::text[]) on conflict (subscription_id) do update"
    " set account_id = coalesce(excluded.account_id, l.account_id), currency = excluded.currency,"
    " amount = excluded.amount, at = excluded.at, rank = excluded.rank,"
    " event_id = excluded.event_id where (excluded.at, excluded.rank) >= (l.at, l.rank)"
)
# A cancellation is dated when it was first asked for (a deletion at the period's end keeps
# the date its customer chose to leave); a withdrawal clears it.
_SET_CANCELLATIONS = (
    "insert into public.subscription_cancellations as c (subscription_id, account_id,"
    " cancelled, feedback, has_comment, reason, cancelled_at, changed_at, rank, event_id)"
    " select v.subscription_id, v.account_id, v.cancelled, v.feedback, v.has_comment, v.reason,"
    " v.since, v.changed_at, v.rank, v.event_id"
    " from unnest(%s::text[], %s::uuid[], %s::bool[], %s::text[], %s::bool[], %s::text[],"
    " %s::timestamptz[], %s::timestamptz[], %s::smallint[], %s::text[]) as v(subscription_id,"
    " account_id, cancelled, feedback, has_comment, reason, since, changed_at, rank, event_id)"
    " on conflict (subscription_id) do update set"
    " account_id = coalesce(excluded.account_id, c.account_id), cancelled = excluded.cancelled,"
    " feedback = case when excluded.cancelled then coalesce(excluded.feedback,"
    "  case when c.cancelled then c.feedback end) end,"
    " has_comment = excluded.cancelled and (excluded.has_comment or (c.cancelled"
    "  and c.has_comment)),"
    " reason = case when excluded.cancelled then coalesce(excluded.reason,"
    "  case when c.cancelled then c.reason end) end,"
    " cancelled_at = case when not excluded.cancelled then null when c.cancelled"
    "  then least(c.cancelled_at, excluded.cancelled_at) else excluded.cancelled_at end,"
    " changed_at = excluded.changed_at, rank = excluded.rank, event_id = excluded.event_id"
    " where (excluded.changed_at, excluded.rank) >= (c.changed_at, c.rank)"
)
_RELEASE = "delete from public.processed_events where consumer = %s and event_id = any(%s)"


def write(consumer: str, plan: Plan) -> Statement | None:
    """Everything a batch decided, as one statement of data-modifying CTEs; None when there is
    nothing to write."""
    parts: list[tuple[str, list[Any]]] = []
    if plan.grants:
        parts.append((_UPSERT_GRANTS, entitlements.columns(plan.grants.values())))
    if plan.links:
        parts.append((_LINK_CUSTOMERS, [list(plan.links), list(plan.links.values())]))
    if plan.accounts:
        parts.append((_SAVE_ACCOUNTS, _state_columns(plan.accounts.values())))
        personal = [(a, by) for a, by in plan.accounts.values() if a.kind == "personal"]
        if personal:
            owned = [(_as_owner(a), by) for a, by in personal]
            parts.append((_MIRROR_PROFILES, _state_columns(owned)))
    if plan.purchases:
        parts.append((_RECORD_PURCHASES, _purchase_columns(plan.purchases)))
    if plan.refunds:
        parts.append((_RECORD_REFUNDS, _refund_columns(plan.refunds)))
    if plan.disputes:
        parts.append((_RECORD_DISPUTES, _dispute_columns(plan.disputes)))
    if plan.quantities:
        teams = list(plan.quantities)
        at = [plan.quantity_at[team] for team in teams]
        parts.append((_SET_QUANTITIES, [teams, [plan.quantities[t] for t in teams], at]))
    if plan.credit_grants:
        parts.append((credits.GRANT, credits.grant_columns(plan.credit_grants)))
        parts.append((credits.RESET, credits.reset_columns(plan.credit_grants)))
    if plan.credit_ends:
        parts.append((credits.END, credits.end_columns(plan.credit_ends)))
    if plan.movements:
        parts.append((_RECORD_MOVEMENTS, _movement_columns(plan.movements)))
    if plan.levels:
        parts.append((_SET_LEVELS, _level_columns(plan.levels)))
    if plan.cancellations:
        parts.append((_SET_CANCELLATIONS, _cancellation_columns(plan.cancellations.values())))
    if plan.released:
        parts.append((_RELEASE, [consumer, list(plan.released)]))
    if plan.settled:
        parts.append((_SETTLE, [list(plan.settled), list(plan.settled.values()), consumer]))
    if not parts:
        return None
    ctes = ", ".join(f"w{n} as ({sql} returning 1)" for n, (sql, _) in enumerate(parts))
    counts = " + ".join(f"(select count(*) from w{n})" for n in range(len(parts)))  # noqa: S608
    params = [value for _, values in parts for value in values]
    return Statement(f"with {ctes} select {counts} as written", params)


def _as_owner(account: Account) -> Account:
    """The account's state as its owner's profile row takes it (keyed by the owner)."""
    return replace(account, id=account.owner_id)


def _state_columns(states: Any) -> list[list[Any]]:
    columns: list[list[Any]] = [[] for _ in range(7)]
    for account, event_id in states:
        values = (
            account.id,
            account.has_access,
            account.access_changed_at,
            event_id,
            account.price_id,
            account.price_changed_at,
            account.customer_id,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return columns


def _purchase_columns(records: Sequence[PurchaseRecord]) -> list[list[Any]]:
    # One row per checkout session (a completion and its later payment may share a batch):
    # paid if either says so.
    by_session: dict[str, PurchaseRecord] = {}
    for record in records:
        seen = by_session.get(record.checkout.session_id)
        if seen is None or (record.checkout.paid and not seen.checkout.paid):
            by_session[record.checkout.session_id] = record
    rows = [
        (
            r.user_id,
            r.account_id,
            r.checkout.price_id,
            r.checkout.session_id,
            r.checkout.customer_id,
            r.checkout.email,
            r.checkout.amount_total,
            r.checkout.currency,
            r.checkout.paid,
            r.checkout.payment_intent,
            r.checkout.quantity,
        )
        for r in by_session.values()
    ]
    return [list(column) for column in zip(*rows, strict=True)]


def _refund_columns(records: Sequence[RefundRecord]) -> list[list[Any]]:
    by_purchase: dict[str, tuple[int, datetime | None]] = {}
    for r in records:
        amount, at = by_purchase.get(r.purchase_id, (0, None))
        by_purchase[r.purchase_id] = (max(amount, r.amount_refunded), at or r.refunded_at)
    return [
        list(by_purchase),
        [amount for amount, _ in by_purchase.values()],
        [at for _, at in by_purchase.values()],
    ]


def _dispute_columns(disputes: Sequence[tuple[Any, datetime]]) -> list[list[Any]]:
    rows = [
        (d.id, d.charge_id, d.payment_intent, d.amount, d.currency, d.reason, d.status, at)
        for d, at in disputes
    ]
    return [list(column) for column in zip(*rows, strict=True)]


def _movement_columns(movements: Sequence[Movement]) -> list[list[Any]]:
    rows = [
        (m.event_id, m.subscription_id, m.account_id, m.currency, m.delta, m.kind, m.at)
        for m in movements
    ]
    return [list(column) for column in zip(*rows, strict=True)]


def _level_columns(levels: Mapping[str, tuple[Level, str | None, str]]) -> list[list[Any]]:
    rows = [
        (sub, account, level.currency, level.amount, level.at, level.rank, event_id)
        for sub, (level, account, event_id) in levels.items()
    ]
    return [list(column) for column in zip(*rows, strict=True)]


def _cancellation_columns(records: Iterable[CancellationRecord]) -> list[list[Any]]:
    rows = [
        (
            r.subscription_id,
            r.account_id,
            r.cancellation is not None,
            r.cancellation.feedback if r.cancellation else None,
            bool(r.cancellation and r.cancellation.has_comment),
            r.cancellation.reason if r.cancellation else None,
            r.since,
            r.at,
            r.rank,
            r.event_id,
        )
        for r in records
    ]
    return [list(column) for column in zip(*rows, strict=True)]


def _account(row: Mapping[str, Any]) -> Account:
    customers = tuple(row.get("customers") or ())
    return Account(**{**row, **_dates(row, _ACCOUNT_DATES), "customers": customers})


def _entitlement(row: Mapping[str, Any]) -> Entitlement:
    return Entitlement(**{**row, **_dates(row, _ENTITLEMENT_DATES)})


def _dates(row: Mapping[str, Any], names: Sequence[str]) -> dict[str, datetime | None]:
    return {n: datetime.fromisoformat(row[n]) if row[n] else None for n in names}
