"""The emulator's Pub/Sub setup is production's: both read from cloudbuild.yaml."""

from __future__ import annotations

import pytest

from adapters.bus.topology import PushPolicy
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
