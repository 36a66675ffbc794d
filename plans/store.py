"""The subscription a plan change is about, found by the price its holder sees it at."""

from __future__ import annotations

from datetime import datetime

from adapters.db.pool import Database, Statement

_HELD = (
    "select e.source_id from public.entitlements e join public.accounts a on a.id = e.account_id"
    " where e.kind = 'subscription' and e.active and e.price_id = %s"
)


def personal_subscription(db: Database, user_id: str, price_id: str) -> str | None:
    """The user's own active subscription at `price_id` (as GET /api/me lists it)."""
    rows = db.fetch_all(
        _HELD + " and a.kind = 'personal' and a.owner_id = %s::uuid"
        " order by e.changed_at desc nulls last limit 1",
        (price_id, user_id),
    )
    return str(rows[0]["source_id"]) if rows else None


def team_subscription(db: Database, team_id: str, price_id: str) -> str | None:
    """The team's active subscription at `price_id`."""
    rows = db.fetch_all(
        _HELD + " and a.kind = 'team' and a.id = %s::uuid"
        " order by e.changed_at desc nulls last limit 1",
        (price_id, team_id),
    )
    return str(rows[0]["source_id"]) if rows else None


def retention_taken(db: Database, customer_id: str) -> bool:
    """Whether the customer accepted the retention coupon before."""
    rows = db.fetch_all(
        "select 1 from public.retention_offers where customer_id = %s", (customer_id,)
    )
    return bool(rows)


def claim_retention(db: Database, customer_id: str, coupon: str, subscription_id: str) -> bool:
    """Record the customer's acceptance; False when one was recorded already (a second call,
    however close to the first)."""
    [rows] = db.run(
        [
            Statement(
                "insert into public.retention_offers (customer_id, coupon, subscription_id)"
                " values (%s, %s, %s) on conflict (customer_id) do nothing returning customer_id",
                (customer_id, coupon, subscription_id),
            )
        ]
    )
    return bool(rows)


def release_retention(db: Database, customer_id: str) -> None:
    """Undo a claim whose coupon Stripe did not apply."""
    db.run(
        [Statement("delete from public.retention_offers where customer_id = %s", (customer_id,))]
    )


def record_scheduled(
    db: Database,
    *,
    source_id: str,
    price_id: str,
    quantity: int,
    effective_at: datetime,
    schedule_id: str,
) -> None:
    """The change the subscription's schedule now holds for its period's end."""
    db.run(
        [
            Statement(
                "insert into public.scheduled_changes (source_id, price_id, quantity,"
                " effective_at, schedule_id) values (%s, %s, %s, %s, %s)"
                " on conflict (source_id) do update set price_id = excluded.price_id,"
                " quantity = excluded.quantity, effective_at = excluded.effective_at,"
                " schedule_id = excluded.schedule_id, recorded_at = now()",
                (source_id, price_id, quantity, effective_at, schedule_id),
            )
        ]
    )


def clear_scheduled(db: Database, source_id: str) -> None:
    """No change is scheduled any more (resumed, cancelled, or replaced by an upgrade)."""
    db.run([Statement("delete from public.scheduled_changes where source_id = %s", (source_id,))])


def sold_per_seat(db: Database, price_id: str) -> bool | None:
    """Whether an active subscription product of the catalogue is sold at `price_id` per seat;
    None when none is sold at it (a price this service does not sell)."""
    rows = db.fetch_all(
        "select per_seat from public.products where stripe_price_id = %s and is_active"
        " and billing_type = 'subscription'",
        (price_id,),
    )
    return bool(rows[0]["per_seat"]) if rows else None


def was_per_seat(db: Database, price_id: str) -> bool | None:
    """Whether a product of the catalogue, sold now or not, was sold at `price_id` per seat;
    None when the catalogue never had it."""
    rows = db.fetch_all(
        "select bool_or(per_seat) as per_seat from public.products where stripe_price_id = %s",
        (price_id,),
    )
    found = rows[0]["per_seat"] if rows else None
    return None if found is None else bool(found)
