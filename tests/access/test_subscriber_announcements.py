"""The access subscriber announces a committed change, and again when a redelivery finds the
change done: a publish that failed after the commit is not lost."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from adapters.bus import PublishError
from adapters.db.pool import Database
from config import Settings
from core.events import Event, parse_event
from dev.samples.catalogue import seed_demo_products
from runtime.container import Container
from tests.access.lifecycle_helpers import profile, session
from tests.helpers import create_user, stripe_event


class FlakyBus:
    """The bus port refusing its first publish, as Pub/Sub does when it is unreachable."""

    def __init__(self) -> None:
        self.failures_left = 1
        self.published: list[tuple[Event, bytes]] = []

    def publish(self, event: Event, data: bytes) -> None:
        if self.failures_left:
            self.failures_left -= 1
            raise PublishError("unavailable")
        self.published.append((event, data))


def test_a_failed_announcement_is_published_on_the_redelivery(
    settings_factory: Callable[..., Settings], db: Database
) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com", name="Ada Lovelace")
    container = Container(settings_factory())
    bus = FlakyBus()
    subscriber = replace(container.access_subscriber, publish=bus.publish)
    event = parse_event(
        json.loads(stripe_event("checkout.session.completed", session(ada, payment_intent=None)))
    )
    try:
        with pytest.raises(PublishError):
            subscriber(event)  # committed, then the publish fails: the delivery must fail
        assert profile(db, ada)["has_access"] is True
        assert subscriber(event) == "duplicate"  # the redelivery: the ledger says done
        subscriber(event)
    finally:
        container.close()
    ids = [e.id for e, _ in bus.published]
    # Keyed by the session: the success page's completion announces under the same id.
    assert ids == [f"granted_{event.object['id']}", f"granted_{event.object['id']}"]
    assert bus.published[0][1] == bus.published[1][1]  # the same message, byte for byte
    grant = bus.published[0][0].object
    assert (grant["email"], grant["price_id"], grant["amount_total"]) == (
        "ada@example.com",
        "price_demo_starter_one_time",
        4900,
    )
