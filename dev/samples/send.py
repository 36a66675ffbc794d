"""Send a signed Stripe-shaped sample event to a webhook, as Stripe would deliver it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from adapters.db.pool import Database
from adapters.stripe_api import sign
from catalogue import store as products
from dev.samples.events import API_VERSION, Facts, sample_event

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
# A proxy from the environment must not see requests to this machine.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Delivery:
    """What the webhook answered to one event."""

    event_id: str
    event_type: str
    status: int
    body: str
    object: dict[str, object]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def send(
    *,
    event_type: str,
    facts: Facts,
    created: int,
    url: str,
    secret: str,
    timeout: float = 10,
    api_version: str = API_VERSION,
    variant: str | None = None,
) -> Delivery:
    """Build the sample (created at `created`, shaped as `api_version` shapes it), sign it with
    `secret` now, POST it to `url`."""
    event = sample_event(
        event_type, facts, created=created, api_version=api_version, variant=variant
    )
    return deliver(event, url=url, secret=secret, timeout=timeout)


def deliver(event: dict[str, Any], *, url: str, secret: str, timeout: float = 10) -> Delivery:
    """POST a whole event to `url`, signed with `secret` now, as Stripe delivers one."""
    payload = json.dumps(event).encode()
    request = urllib.request.Request(  # noqa: S310 - the URL is the operator's own
        url,
        data=payload,
        method="POST",
        headers={
            "Content-Type": "application/json; charset=utf-8",
            "Stripe-Signature": sign(payload, secret=secret, timestamp=int(time.time())),
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        },
    )
    opener = DIRECT if urlsplit(url).hostname in LOOPBACK else urllib.request.build_opener()
    try:
        with opener.open(request, timeout=timeout) as response:
            status, body = response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode(errors="replace")
    return Delivery(
        event_id=event["id"],
        event_type=event["type"],
        status=status,
        body=body.strip(),
        object=event["data"]["object"],
    )


def product_facts(facts: Facts, *, db: Database) -> Facts:
    """`facts` with the amount, mode and interval of the product sold at its price, when one is
    (a one-time product's checkout is a `payment` one: a lifetime purchase)."""
    with db.transaction() as conn:
        product = products.by_price(conn, facts.price)
    if product is None:
        return facts
    subscribed = product.billing_type == "subscription"
    return replace(
        facts,
        amount=int(product.price * 100),
        mode="subscription" if subscribed else "payment",
        interval=product.billing_interval or "month",
    )
