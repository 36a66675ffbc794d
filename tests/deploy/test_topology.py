"""The emulator's Pub/Sub setup is production's: both read from cloudbuild.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from adapters.bus.filters import message_filter, subscription_name
from adapters.bus.topology import (
    DEAD_LETTER_TOPIC_RETENTION,
    DELIVERY_ATTEMPTS,
    PushPolicy,
    retired,
)
from config import Settings
from core.app_events import (
    ACCOUNT_DELETION_REQUESTED,
    APP_EVENTS,
    CREDITS_TOP_UP,
    EMAIL_RESEND_REQUESTED,
    USAGE_RECORDED,
)
from core.events import APP_EVENT_PREFIX, SUBSCRIBED_TYPES
from emails.plan import handled_types
from main import create_app
from runtime.consumers import CONSUMED, MESSAGE_FILTERS, ON_THE_BUS, subscription_of
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
    # Every Stripe event; of our own, a consumption's overage to report, the account
    # deletions it runs and the automatic top-ups it charges (no announcement).
    assert access == SUBSCRIBED_TYPES | {USAGE_RECORDED, ACCOUNT_DELETION_REQUESTED, CREDITS_TOP_UP}
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


def _pubsub(calls: list[list[str]]) -> list[tuple[str, ...]]:
    """The Pub/Sub calls that change something, as (group, verb, name)."""
    return [
        tuple(call[1:4])
        for call in calls
        if call[:1] == ["pubsub"] and call[2] in ("create", "delete", "seek")
    ]


def test_a_changed_filter_is_a_new_subscription_made_before_the_old_one_goes() -> None:
    """The build the founder runs over last month's deployment (an access subscription named
    before filters had versions, and an emails one of another filter): each new subscription
    is made beside the old one, after a snapshot of it, seeks to that snapshot (the old one's
    backlog and everything published since), and only then is the old one deleted."""
    topic = "payment-events"
    new = {t: subscription_of(topic, t) for t in ("access", "emails")}
    old_emails = f"{topic}-emails-{'0' * 8}"
    calls = _pubsub(
        topology.provisioning("local-project", existing=(f"{topic}-access", old_emails))
    )
    for target, old in (("access", f"{topic}-access"), ("emails", old_emails)):
        snapshot = f"{old}-to-{new[target].rsplit('-', 1)[-1]}"
        steps = [
            ("snapshots", "create", snapshot),
            ("subscriptions", "create", new[target]),
            ("subscriptions", "seek", new[target]),
            ("subscriptions", "delete", old),
            ("snapshots", "delete", snapshot),
        ]
        assert [c for c in calls if c in steps] == steps, target
    deleted = {c[2] for c in calls if c[:2] == ("subscriptions", "delete")}
    assert deleted == {f"{topic}-access", old_emails}, "nothing else is deleted"


def test_a_build_run_again_changes_no_subscription_whose_filter_is_unchanged() -> None:
    """Endpoint, retries, dead letters and retention are updated in place; nothing is made,
    sought or deleted when the filter's subscription exists."""
    current = tuple(subscription_of("payment-events", t) for t in ("access", "emails"))
    calls = _pubsub(topology.provisioning("local-project", existing=current))
    assert not [c for c in calls if c[0] in ("subscriptions", "snapshots") and c[2] in current]
    assert not [c for c in calls if c[1] in ("delete", "seek")]
    updated = topology.provisioning("local-project", existing=current)
    names = {c[3] for c in updated if c[1:3] == ["subscriptions", "update"]}
    assert set(current) <= names


def test_two_old_subscriptions_stop_the_build_before_anything_changes() -> None:
    topic = "payment-events"
    with pytest.raises(AssertionError, match="several subscriptions besides"):
        topology.provisioning(
            "local-project", existing=(f"{topic}-access", f"{topic}-access-1234abcd")
        )


def test_each_filter_names_its_own_subscription() -> None:
    assert subscription_name("t", "access", "") == "t-access"
    first = subscription_name("t", "access", 'attributes.event_type = "a"')
    second = subscription_name("t", "access", 'attributes.event_type = "b"')
    assert first != second
    assert re.fullmatch(r"t-access-[0-9a-f]{8}", first)
    assert retired(
        ["t-access", first, second, "t-emails", "t-access-pull", "t-dead-letter"],
        "t",
        "access",
        second,
    ) == ["t-access", first]
