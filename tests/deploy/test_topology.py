"""The emulator's Pub/Sub setup is production's: both read from cloudbuild.yaml."""

from __future__ import annotations

import re

import pytest

from adapters.bus.topology import (
    DEAD_LETTER_TOPIC_RETENTION,
    DELIVERY_ATTEMPTS,
    MESSAGE_FILTERS,
    PushPolicy,
)
from core.email.plan import handled_types
from core.events import APP_EVENT_PREFIX, SUBSCRIBED_TYPES
from tests.deploy import topology


def test_cloudbuild_names_and_policy_are_the_local_defaults() -> None:
    """`make run` and the tests (PushPolicy's defaults) use the values production gets."""
    production = topology.cloudbuild("local-project")
    topology.check_names(production)
    assert set(production.push) == {"access", "emails"}
    assert production.topics == {production.topic, production.dead_letter_topic}
    assert PushPolicy() == production.policy()
    [dead] = [
        s for s in production.subscriptions.values() if s.topic == production.dead_letter_topic
    ]
    assert dead.never_expires
    assert dead.retention == PushPolicy().retention


def test_a_setting_the_emulator_setup_does_not_reproduce_fails() -> None:
    sub = topology.Subscription(name="payment-events-access", topic="payment-events")
    with pytest.raises(ValueError, match="--enable-exactly-once-delivery"):
        sub.flag("--enable-exactly-once-delivery", None)
    assert sub.flag("--min-retry-delay", "10s").min_retry_delay == 10
    assert topology.seconds("7d") == 7 * 86400


def test_each_subscriber_has_its_attempts_and_filter_and_dead_letters_keep_31_days() -> None:
    production = topology.cloudbuild("local-project")
    attempts = production.delivery_attempts()
    assert attempts == {
        t: DELIVERY_ATTEMPTS.get(t, PushPolicy().max_delivery_attempts) for t in attempts
    }
    assert attempts["emails"] > attempts["access"]
    assert production.message_filters() == MESSAGE_FILTERS
    assert production.topic_retention == {production.dead_letter_topic: DEAD_LETTER_TOPIC_RETENTION}


def admits(expression: str, event_type: str) -> bool:
    """Pub/Sub's filter language, the part the filters use: `OR`, `NOT`, `hasPrefix(a, p)`
    and `a = "v"` on `attributes.event_type`."""

    def term(text: str) -> bool:
        text = text.strip()
        if text.startswith("NOT "):
            return not term(text[4:])
        prefix = re.fullmatch(r'hasPrefix\(attributes\.event_type, "([^"]*)"\)', text)
        if prefix:
            return event_type.startswith(prefix[1])
        equal = re.fullmatch(r'attributes\.event_type = "([^"]*)"', text)
        assert equal, f"the test cannot read {text!r}"
        return event_type == equal[1]

    return any(term(part) for part in expression.split(" OR "))


APP_TYPES = {"app.access.granted", "app.access.revoked", "app.account.invited"}


def test_the_filters_let_through_exactly_what_each_subscriber_acts_on() -> None:
    every = SUBSCRIBED_TYPES | APP_TYPES
    access = {t for t in every if admits(MESSAGE_FILTERS["access"], t)}
    emails = {t for t in every | handled_types() if admits(MESSAGE_FILTERS["emails"], t)}
    assert access == SUBSCRIBED_TYPES  # every Stripe event, no announcement
    assert handled_types() <= emails  # every type an e-mail is planned for
    assert not {t for t in emails if not t.startswith(APP_EVENT_PREFIX)} - handled_types()
    for expression in MESSAGE_FILTERS.values():
        assert len(expression.encode()) <= 256, "Pub/Sub's limit on a filter"
