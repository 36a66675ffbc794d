"""The emulator's Pub/Sub setup is production's: both read from cloudbuild.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from adapters.bus.filters import message_filter
from adapters.bus.topology import DEAD_LETTER_TOPIC_RETENTION, DELIVERY_ATTEMPTS, PushPolicy
from config import Settings
from core.app_events import (
    ACCOUNT_DELETION_REQUESTED,
    APP_EVENTS,
    EMAIL_RESEND_REQUESTED,
    USAGE_RECORDED,
)
from core.events import APP_EVENT_PREFIX, SUBSCRIBED_TYPES
from emails.plan import handled_types
from main import create_app
from runtime.consumers import CONSUMED, MESSAGE_FILTERS, ON_THE_BUS
from runtime.targets import TARGETS
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
    """Pub/Sub's filter language, the part the filters use: `OR`, `NOT`, `(... AND ...)`,
    `hasPrefix(a, p)` and `a = "v"` on `attributes.event_type`."""

    def term(text: str) -> bool:
        text = text.strip()
        if text.startswith("(") and text.endswith(")"):
            return all(term(part) for part in text[1:-1].split(" AND "))
        if text.startswith("NOT "):
            return not term(text[4:])
        prefix = re.fullmatch(r'hasPrefix\(attributes\.event_type, "([^"]*)"\)', text)
        if prefix:
            return event_type.startswith(prefix[1])
        equal = re.fullmatch(r'attributes\.event_type = "([^"]*)"', text)
        assert equal, f"the test cannot read {text!r}"
        return event_type == equal[1]

    return any(term(part) for part in expression.split(" OR "))


def test_the_filters_let_through_exactly_what_each_subscriber_acts_on() -> None:
    every = SUBSCRIBED_TYPES | APP_EVENTS
    access = {t for t in every if admits(MESSAGE_FILTERS["access"], t)}
    emails = {t for t in every | handled_types() if admits(MESSAGE_FILTERS["emails"], t)}
    # Every Stripe event; of our own, a consumption's overage to report and the account
    # deletions it runs (no announcement).
    assert access == SUBSCRIBED_TYPES | {USAGE_RECORDED, ACCOUNT_DELETION_REQUESTED}
    assert USAGE_RECORDED not in emails
    assert handled_types() <= emails  # every type an e-mail is planned for
    assert EMAIL_RESEND_REQUESTED in emails  # an admin's resend, sent where the key is
    assert not {t for t in emails if not t.startswith(APP_EVENT_PREFIX)} - handled_types()
    for expression in MESSAGE_FILTERS.values():
        assert len(expression.encode()) <= 256, "Pub/Sub's limit on a filter"
    assert set(CONSUMED) == set(TARGETS)
    for target, types in CONSUMED.items():
        assert {t for t in ON_THE_BUS if admits(MESSAGE_FILTERS[target], t)} == types, target


def test_the_deploy_takes_its_filters_from_the_code_not_a_copy(tmp_path: Path) -> None:
    """cloudbuild.yaml's filters step prints them with the image's code; the subscriptions step
    reads what it wrote (the dry run above gets this checkout's output) and names no filter.
    `flask --app main events filters` prints the same lines."""
    config = yaml.safe_load(topology.CLOUDBUILD.read_text())
    steps = {step["id"]: step for step in config["steps"]}
    step = steps["filters"]
    assert (step["name"], step["dir"]) == ("${_IMAGE}", "/app")
    assert "/app/.venv/bin/python -m runtime.consumers > /workspace/filters" in step["args"][1]
    assert "filters" in steps["subscriptions"]["waitFor"]
    assert "hasPrefix" not in topology.CLOUDBUILD.read_text()
    written = dict(line.split(" ", 1) for line in topology.filters_written().splitlines())
    assert written == MESSAGE_FILTERS
    app = create_app(Settings(app_env="development", data_dir=tmp_path, database_url=None))
    printed = app.test_cli_runner().invoke(args=["events", "filters"])
    assert printed.output == topology.filters_written()


def test_a_filter_names_the_wanted_types_or_refuses_the_rest_whichever_is_shorter() -> None:
    among = {"app.a", "app.b", "invoice.paid", "invoice.failed", "charge.refunded"}
    assert message_filter({"app.a", "app.b"}, among) == 'hasPrefix(attributes.event_type, "app.")'
    assert message_filter(among - {"app.a", "app.b"}, among) == (
        'NOT hasPrefix(attributes.event_type, "app.")'
    )
    assert message_filter({"app.a", "invoice.paid", "invoice.failed"}, among) == (
        'hasPrefix(attributes.event_type, "invoice.") OR attributes.event_type = "app.a"'
    )
    assert message_filter(among, among) is None  # every message: no filter
    with pytest.raises(ValueError, match=r"not on the bus: invoice\.created"):
        message_filter({"invoice.created"}, among)
    with pytest.raises(ValueError, match="wants no event"):
        message_filter(set(), among)


def test_a_group_wanted_all_but_a_few_is_its_prefix_without_them() -> None:
    among = {"app.a", "app.b", "app.c", "invoice.paid", "charge.refunded"}
    assert message_filter({"app.a", "app.b", "invoice.paid"}, among) == (
        '(hasPrefix(attributes.event_type, "app.") AND NOT attributes.event_type = "app.c")'
        ' OR hasPrefix(attributes.event_type, "invoice.")'
    )
    assert message_filter({"invoice.paid", "charge.refunded", "app.c"}, among) == (
        'NOT hasPrefix(attributes.event_type, "app.") OR attributes.event_type = "app.c"'
    )
