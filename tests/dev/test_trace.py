"""One trace per event: the webhook request's trace reaches every line about the event.

The deployed path as `make run` builds it with EVENT_BUS=pubsub: the API publishes to the
emulator, which pushes through local Google and the Cloud Run front stand-in to the `access` and
`emails` targets (bin/serve, separate processes, JSON lines as on Cloud Run). A webhook request
carrying `traceparent` must leave lines under that trace id in both targets' logs, each in a
span of its own; a push that fails is an Error Reporting event of its service, under that trace.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from pydantic import SecretStr

from access.announcements import announced_ids
from adapters.db.pool import Database
from config import Settings
from dev import stack as local_stack
from runtime import logs
from tests.access.lifecycle_helpers import subscription
from tests.access.test_subscriber import completed
from tests.helpers import HANG_GUARD, create_user, stripe_event, stripe_signature, wait_for
from tests.pubsub_fixtures import PubSub, pubsub_fixture  # noqa: F401  # fixture by name

TRACE_ID = secrets.token_hex(16)
WEBHOOK_SPAN = secrets.token_hex(8)


@pytest.fixture
def deployed(
    pubsub: PubSub, database_url: str, tmp_path: Path
) -> Iterator[tuple[str, Settings, Database]]:
    """The local stack with Pub/Sub (a project of its own on the session's emulator)."""
    settings = Settings(
        app_env="development",
        database_url=SecretStr(database_url),
        event_bus="pubsub",
        pubsub_emulator_host=pubsub.host,
        google_cloud_project=f"trace-{uuid.uuid4().hex[:8]}",
        data_dir=tmp_path / "data",
        email_outbox_dir=tmp_path / "outbox",
    )
    with contextlib.ExitStack() as stack:
        container = local_stack.start(settings, stack)
        server = local_stack.api_server(container, host="127.0.0.1", port=0)
        stack.callback(server.server_close)
        base = local_stack.serve_in_background(server, stack)
        yield base, container.settings, container.db


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.startswith("{")]


def traced(path: Path) -> list[dict[str, Any]]:
    """The target's lines under the test's trace."""
    return [
        line for line in json_lines(path) if str(line.get(logs.TRACE_KEY, "")).endswith(TRACE_ID)
    ]


def test_a_webhook_requests_trace_reaches_the_access_and_email_lines(
    deployed: tuple[str, Settings, Database],
) -> None:
    base, settings, db = deployed
    buyer = create_user(db, f"traced-{uuid.uuid4().hex[:6]}@example.com")
    body = stripe_event("checkout.session.completed", completed(buyer))
    event_id = json.loads(body)["id"]
    response = requests.post(
        base + "/api/webhook/payments",
        data=body,
        headers={
            "Stripe-Signature": stripe_signature(body),
            "Content-Type": "application/json",
            "traceparent": f"00-{TRACE_ID}-{WEBHOOK_SPAN}-01",
        },
        timeout=HANG_GUARD,
    )
    assert response.status_code == 200
    wait_for(
        lambda: db.fetch_all(
            "select 1 from public.sent_emails where event_id = any(%s)",
            (list(announced_ids(event_id, json.loads(body)["data"]["object"]["id"])),),
        ),
    )

    access = settings.data_dir / "access.log"
    emails = settings.data_dir / "emails.log"
    wait_for(lambda: traced(access) and traced(emails))
    for path in (access, emails):
        lines = traced(path)
        assert any(event_id in line["message"] for line in lines), path.name
        assert all(
            line[logs.TRACE_KEY] == f"projects/{settings.google_cloud_project}/traces/{TRACE_ID}"
            for line in lines
        )
        spans = {line.get(logs.SPAN_KEY) for line in lines}
        assert WEBHOOK_SPAN not in spans, "a subscriber logs in a span of its own"
        assert None not in spans
    # The e-mail about the purchase comes from what access announced: the trace went on.
    assert any(line["message"].startswith("emails: app.access") for line in traced(emails))


def test_a_failing_push_is_an_error_report_of_its_service_under_the_trace(
    deployed: tuple[str, Settings, Database],
) -> None:
    base, settings, _ = deployed
    # A renewal for a customer no checkout linked: access raises, Pub/Sub will retry.
    body = stripe_event(
        "customer.subscription.updated", subscription(customer="cus_untraced", id="sub_untraced")
    )
    trace_id = secrets.token_hex(16)
    response = requests.post(
        base + "/api/webhook/payments",
        data=body,
        headers={
            "Stripe-Signature": stripe_signature(body),
            "Content-Type": "application/json",
            "traceparent": f"00-{trace_id}-{WEBHOOK_SPAN}-01",
        },
        timeout=HANG_GUARD,
    )
    assert response.status_code == 200

    access = settings.data_dir / "access.log"

    def errors() -> list[dict[str, Any]]:
        return [
            line
            for line in json_lines(access)
            if line["severity"] == "ERROR" and str(line.get(logs.TRACE_KEY, "")).endswith(trace_id)
        ]

    [error, *_] = wait_for(errors)
    assert error["@type"] == logs.REPORTED_ERROR_TYPE
    assert error["serviceContext"] == {"service": "access", "version": "access-00001-local"}
    assert "ProfileNotLinked" in error["stack_trace"]
