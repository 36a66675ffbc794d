"""With the in-process bus full, the webhook answers 503 so that Stripe retries later."""

from __future__ import annotations

from collections.abc import Callable

import requests

from adapters.bus.inline import InlineBus
from tests.conftest import Api
from tests.helpers import stripe_event, stripe_signature, wait_for


def post(api: Api, body: bytes) -> int:
    headers = {"Stripe-Signature": stripe_signature(body), "Content-Type": "application/json"}
    return int(api.post("/api/webhook/payments", data=body, headers=headers).status_code)


def test_past_max_pending_the_webhook_answers_503(api_factory: Callable[..., Api]) -> None:
    api = api_factory(event_bus="inline", inline_bus_max_pending=1)
    # No profile has this customer: access fails and keeps the event queued for a retry.
    unlinked = {
        "object": "invoice",
        "customer": "cus_nobody",
        "subscription": "sub_nobody",
        "billing_reason": "subscription_create",
    }
    assert post(api, stripe_event("invoice.paid", unlinked)) == 200
    bus = api.container.bus
    assert isinstance(bus, InlineBus)
    # Each event's access delivery fails and waits for its retry in the queue (0.5 s and more):
    # once one does, the queue is at its bound and the next event is refused.
    answers: list[requests.Response] = []

    def next_event_refused() -> bool:
        body = stripe_event("invoice.paid", unlinked)
        headers = {"Stripe-Signature": stripe_signature(body)}
        answers.append(api.post("/api/webhook/payments", data=body, headers=headers))
        return answers[-1].status_code == 503

    wait_for(next_event_refused)
    assert answers[-1].json() == {"error": "Event could not be queued; Stripe will retry"}
