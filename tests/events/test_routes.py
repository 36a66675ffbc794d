"""POST /api/webhook/payments: what is refused at the door, before anything is published."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, stripe_event, stripe_signature


@pytest.fixture
def buyer(db: Database) -> str:
    seed_demo_products(db)
    return create_user(db, "buyer@example.com")


def has_access(api: Api, db: Database, user_id: str) -> bool:
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (user_id,))
    return bool(row["has_access"])


@pytest.mark.parametrize("offset", [310, 3600, 10 * 365 * 86400])
def test_a_signature_dated_in_the_future_is_refused(
    api: Api, db: Database, buyer: str, offset: int
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    response = post_event(api, body, timestamp=int(time.time()) + offset)
    assert response.status_code == 400
    assert response.json() == {"error": "Timestamp outside the tolerance zone"}
    assert not has_access(api, db, buyer)


def test_a_signature_a_little_ahead_is_accepted(api: Api, db: Database, buyer: str) -> None:
    # Stripe's clock and ours differ by a few seconds: the tolerance works both ways.
    body = stripe_event("checkout.session.completed", completed(buyer))
    assert post_event(api, body, timestamp=int(time.time()) + 60).status_code == 200
    assert has_access(api, db, buyer)


def signed_at(body: bytes, timestamp: int) -> tuple[str, str]:
    """The `t=` and `v1=` items of the header Stripe would send with `body` at `timestamp`."""
    t, v1 = stripe_signature(body, timestamp=timestamp).split(",")
    return t, v1


@pytest.mark.parametrize(
    "arrange",
    [
        # The signed time ahead, a current one beside it (before or after, with or without
        # spaces): whichever `t` one reader takes, another might take the other. The third was
        # accepted once: the SDK skips ` t=` (a name with a space), a stripping reader did not.
        lambda now, ahead, v1: f"{now},{ahead},{v1}",
        lambda now, ahead, v1: f"{ahead},{now},{v1}",
        lambda now, ahead, v1: f"{v1}, {now},{ahead}",
        lambda now, ahead, v1: f"{ahead}, {now},{v1}",
        lambda now, ahead, v1: f"{ahead},{v1},{now}",
        lambda now, ahead, v1: f"{ahead},{v1},{ahead}",
    ],
)
def test_a_signature_header_with_two_timestamps_is_refused(
    api: Api, db: Database, buyer: str, arrange: Callable[[str, str, str], str]
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    now = int(time.time())
    ahead, v1 = signed_at(body, now + 86400)
    current, _ = signed_at(body, now)
    header = arrange(current, ahead, v1)
    response = api.post(
        "/api/webhook/payments",
        data=body,
        headers={"Stripe-Signature": header, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "Stripe-Signature header carries more than one timestamp (t=)"
    }
    assert not has_access(api, db, buyer)


def test_the_future_is_judged_on_the_signed_timestamp(api: Api, db: Database, buyer: str) -> None:
    # One `t`, signed a day ahead, with a `t`-like item of another name: still a day ahead.
    body = stripe_event("checkout.session.completed", completed(buyer))
    now = int(time.time())
    ahead, v1 = signed_at(body, now + 86400)
    for header in (f"{ahead},{v1}", f"{ahead},{v1},T={now}", f"{ahead},{v1},tt={now}"):
        response = api.post(
            "/api/webhook/payments",
            data=body,
            headers={"Stripe-Signature": header, "Content-Type": "application/json"},
        )
        assert response.status_code == 400, header
        assert response.json() == {"error": "Timestamp outside the tolerance zone"}
    assert not has_access(api, db, buyer)


def test_a_signature_header_that_is_not_ascii_is_refused(
    api: Api, db: Database, buyer: str
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    header = stripe_signature(body).encode() + b",v1=\xff\xfe"
    response = api.post(
        "/api/webhook/payments",
        data=body,
        headers={"Stripe-Signature": header, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Stripe-Signature header is not ASCII"}
    assert not has_access(api, db, buyer)


@pytest.mark.parametrize(
    ("key", "livemode"), [("sk_test_fake", True), ("sk_live_fake", False), ("rk_live_x", False)]
)
def test_an_event_of_the_other_mode_is_refused_and_logged(
    api_factory: Callable[..., Api],
    db: Database,
    buyer: str,
    caplog: pytest.LogCaptureFixture,
    key: str,
    livemode: bool,
) -> None:
    api = api_factory(stripe_secret_key=key)
    body = stripe_event("checkout.session.completed", completed(buyer), livemode=livemode)
    with caplog.at_level(logging.ERROR, logger="events.intake"):
        response = api.post(
            "/api/webhook/payments", data=body, headers={"Stripe-Signature": stripe_signature(body)}
        )
    assert response.status_code == 400
    assert response.json() == {
        "error": "Event mode (live or test) does not match this service's Stripe key (livemode)"
    }
    assert f"livemode={livemode}" in caplog.text
    assert not has_access(api, db, buyer)


def test_an_event_of_the_same_mode_passes(
    api_factory: Callable[..., Api], db: Database, buyer: str
) -> None:
    api = api_factory(stripe_secret_key="sk_live_fake")
    body = stripe_event("checkout.session.completed", completed(buyer), livemode=True)
    assert post_event(api, body).status_code == 200
    assert has_access(api, db, buyer)
