"""Load generation for the webhook benchmark: signed invoice.paid events, concurrent clients,
latency percentiles. Loopback only, bounded by a request count and a duration."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WEBHOOK_PATH = "/api/webhook/payments"
PRICE = "price_demo_team_monthly"
NULL_INVOICE_FIELDS = (
    *("application", "application_fee_amount", "custom_fields", "description", "discount"),
    *("due_date", "footer", "from_invoice", "last_finalization_error", "on_behalf_of"),
    *("next_payment_attempt", "receipt_number", "rendering", "shipping_cost"),
    *("statement_descriptor", "tax", "test_clock", "transfer_data"),
)


def invoice_paid_template(billing_reason: str = "subscription_cycle") -> bytes:
    """A Stripe `invoice.paid` event (API 2023-08-16) of about 4 KB, with placeholders.

    `subscription_cycle` (a renewal) calls for an e-mail; `subscription_create` does not.
    """
    line = {
        "id": "il_1OxYzA2eZvKYlo2C0aB1cD2e",
        "object": "line_item",
        "amount": 1900,
        "amount_excluding_tax": 1900,
        "currency": "usd",
        "description": "1 x Team plan (at $19.00 / month)",
        "discount_amounts": [],
        "discountable": True,
        "discounts": [],
        "livemode": False,
        "metadata": {},
        "period": {"end": 1766275200, "start": 1763683200},
        "plan": {
            "id": PRICE,
            "object": "plan",
            "active": True,
            "amount": 1900,
            "interval": "month",
        },
        "price": {
            "id": PRICE,
            "object": "price",
            "active": True,
            "billing_scheme": "per_unit",
            "currency": "usd",
            "product": "prod_Team1234567890",
            "recurring": {"interval": "month", "interval_count": 1, "usage_type": "licensed"},
            "tax_behavior": "unspecified",
            "type": "recurring",
            "unit_amount": 1900,
        },
        "proration": False,
        "quantity": 1,
        "subscription": "sub_1OxYz02eZvKYlo2CbCdEfGhI",
        "subscription_item": "si_PmNoPqRsTuVwXy",
        "tax_amounts": [],
        "tax_rates": [],
        "type": "subscription",
    }
    invoice: dict[str, Any] = {
        "id": "in_@ID@",
        "object": "invoice",
        "account_country": "US",
        "account_name": "Acme, Inc.",
        "amount_due": 1900,
        "amount_paid": 1900,
        "amount_remaining": 0,
        "attempt_count": 1,
        "attempted": True,
        "auto_advance": False,
        "billing_reason": billing_reason,
        "charge": "ch_3OxYzB2eZvKYlo2C1aBcDeFg",
        "collection_method": "charge_automatically",
        "created": 1763683200,
        "currency": "usd",
        "customer": "@CUSTOMER@",
        "customer_address": {"city": None, "country": "US", "line1": None, "postal_code": "94103"},
        "customer_email": "@CUSTOMER@@example.com",
        "customer_name": "Ada Lovelace",
        "default_payment_method": None,
        "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1Nv0FG/test_YWNjdF8xTnYwRkc",
        "invoice_pdf": "https://pay.stripe.com/invoice/acct_1Nv0FG/test_YWNjdF8xTnYwRkc/pdf",
        "lines": {
            "object": "list",
            "data": [line],
            "has_more": False,
            "total_count": 1,
            "url": "/v1/invoices/in_@ID@/lines",
        },
        "livemode": False,
        "metadata": {},
        "number": "ACME-@ID@",
        "paid": True,
        "payment_intent": "pi_3OxYzB2eZvKYlo2C1hIjKlMn",
        "period_end": 1763683200,
        "period_start": 1761004800,
        "status": "paid",
        "status_transitions": {"finalized_at": 1763686800, "paid_at": 1763686805},
        "subscription": "sub_1OxYz02eZvKYlo2CbCdEfGhI",
        "subtotal": 1900,
        "total": 1900,
        "total_tax_amounts": [],
        "webhooks_delivered_at": None,
        **dict.fromkeys(NULL_INVOICE_FIELDS),
        "automatic_tax": {"enabled": False, "status": None},
        "customer_tax_exempt": "none",
        "customer_tax_ids": [],
        "effective_at": 1763686800,
        "ending_balance": 0,
        "starting_balance": 0,
        "post_payment_credit_notes_amount": 0,
        "pre_payment_credit_notes_amount": 0,
        "total_discount_amounts": [],
    }
    event = {
        "id": "evt_@ID@",
        "object": "event",
        "api_version": "2023-08-16",
        "created": 1111111111,
        "data": {"object": invoice, "previous_attributes": {"paid": False, "status": "open"}},
        "livemode": False,
        "pending_webhooks": 2,
        "request": {"id": None, "idempotency_key": None},
        "type": "invoice.paid",
    }
    return json.dumps(event, indent=2).encode()


@dataclass(frozen=True)
class Events:
    """Unique events: the i-th one for customer `i mod customers`, each customer's in order."""

    prefix: str
    customers: int
    template: bytes = field(default_factory=invoice_paid_template)
    base_created: int = field(default_factory=lambda: int(time.time()) - 3600)

    def body(self, i: int) -> bytes:
        customer = f"cus_bench_{i % self.customers}".encode()
        # Later rounds are later events: no two events of one customer share a `created`.
        created = str(self.base_created + i // self.customers).encode()
        # Each customer renews its own subscription (the template's id, made unique per
        # customer at the same length).
        subscription = f"sub_bench{i % self.customers:019d}".encode()
        return (
            self.template.replace(b"@ID@", f"{self.prefix}{i:08d}".encode())
            .replace(b"@CUSTOMER@", customer)
            .replace(b"1111111111", created)
            .replace(b"sub_1OxYz02eZvKYlo2CbCdEfGhI", subscription)
        )

    def event_id(self, i: int) -> str:
        return f"evt_{self.prefix}{i:08d}"


def signature(body: bytes, secret: str) -> str:
    """The Stripe-Signature header, computed as Stripe does."""
    t = int(time.time())
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def http_sender(port: int, events: Events, secret: str) -> Callable[[int], bool]:
    """POST the i-th event over a keep-alive connection per client thread."""
    local = threading.local()

    def send(i: int) -> bool:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = events.body(i)
        headers = {"Content-Type": "application/json", "Stripe-Signature": signature(body, secret)}
        try:
            conn.request("POST", WEBHOOK_PATH, body, headers)
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            local.conn = None
            return False
        return response.status == 200

    return send


@dataclass
class Result:
    """What one scenario measured."""

    name: str
    ok: int
    failed: int
    elapsed: float
    latencies: list[float]
    effects: tuple[int, int, float] | None = None  # applied, acknowledged, seconds

    @property
    def throughput(self) -> float:
        return self.ok / self.elapsed if self.elapsed else 0.0

    def percentile(self, p: float) -> float:
        """Latency percentile in milliseconds."""
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


def drive(
    name: str, send: Callable[[int], bool], *, clients: int, duration: float, limit: int, first: int
) -> Result:
    """Call `send(i)` for i = first, first+1, ... from `clients` threads until `duration` has
    passed or `limit` calls were made."""
    counter = itertools.count(first)
    stop_at = first + limit
    deadline = time.perf_counter() + duration
    latencies: list[float] = []
    outcomes: list[bool] = []

    def client() -> None:
        while time.perf_counter() < deadline and (i := next(counter)) < stop_at:
            started = time.perf_counter()
            ok = send(i)
            latencies.append(time.perf_counter() - started)  # list.append is atomic
            outcomes.append(ok)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    ok = sum(outcomes)
    return Result(name, ok, len(outcomes) - ok, elapsed, latencies)
