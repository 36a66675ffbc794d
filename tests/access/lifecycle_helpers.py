"""Shared by the lifecycle tests: Stripe-shaped objects at each stage of a customer's life."""

from __future__ import annotations

import time
from typing import Any

from adapters.db.pool import Database
from tests.conftest import Api
from tests.helpers import HANG_GUARD, stripe_signature

MONTHLY = "price_demo_team_monthly"
ONE_TIME = "price_demo_starter_one_time"
GITHUB = "price_demo_pro_github"


def post_event(api: Api, body: bytes) -> None:
    response = api.post(
        "/api/webhook/payments", data=body, headers={"Stripe-Signature": stripe_signature(body)}
    )
    assert response.status_code == 200, response.text


def settle(api: Api) -> None:
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]


def profile(db: Database, user_id: str) -> dict[str, Any]:
    [row] = db.fetch_all(
        "select customer_id, price_id, has_access from public.profiles where id = %s", (user_id,)
    )
    return row


def link(db: Database, user_id: str, customer_id: str, *, access: bool = False) -> None:
    """The user's own account pays as `customer_id` (as a checkout leaves it), and their
    profile mirrors it."""
    with db.transaction() as conn:
        for table, key in (("accounts", "owner_id"), ("profiles", "id")):
            conn.execute(
                f"update public.{table} set customer_id = %s, has_access = %s"  # noqa: S608
                f" where {key} = %s",
                (customer_id, access, user_id),
            )


def subscription(*, price: str = MONTHLY, status: str = "active", **extra: Any) -> dict[str, Any]:
    return {
        "id": "sub_ada",
        "object": "subscription",
        "customer": "cus_ada",
        "status": status,
        "cancel_at_period_end": False,
        "current_period_end": 1798675200,  # 2026-12-31
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": price}}]},
        **extra,
    }


def session(user: str | None, *, price: str | None = ONE_TIME, **extra: Any) -> dict[str, Any]:
    return {
        "id": "cs_test_life0001",
        "object": "checkout.session",
        "client_reference_id": user,
        "customer": "cus_ada",
        "mode": "payment",
        "metadata": {"price_id": price} if price else {},
        "payment_status": "paid",
        "payment_intent": "pi_ada",
        "amount_total": 4900,
        "currency": "usd",
        "created": int(time.time()),
        "customer_details": {"email": "ada@example.com", "name": "Ada Lovelace"},
        **extra,
    }
