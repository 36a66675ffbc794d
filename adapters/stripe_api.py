"""Stripe through its SDK, API version pinned; the only module that imports `stripe`."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# Stripe's SDK (costly to import, with `requests`: bench/coldstart.py) is loaded by the first
# call that needs it: a process's first request is often one that never talks to Stripe.
if TYPE_CHECKING:
    import stripe

from config import MissingSetting
from core.stripe_objects import (
    StripeProduct,
    Trial,
    checkout_quantity,
    display_names,
    lookup_keys,
    subscription_trial,
)

log = logging.getLogger(__name__)


class PaymentsNotConfigured(MissingSetting):
    """STRIPE_SECRET_KEY is not set."""


class PaymentsUnavailable(RuntimeError):
    """Stripe could not be reached, timed out, or failed on its side: try again later."""


class StripeCallFailed(RuntimeError):
    """Stripe refused or did not answer a call."""


class StripeGateway:
    """The Stripe calls this service makes; the client is built on first use."""

    def __init__(
        self, *, api_key: str | None, api_base: str | None, api_version: str, timeout: float
    ) -> None:
        self._api_key = api_key
        self._timeout = timeout
        self._api_base = api_base
        self._api_version = api_version
        self._client: stripe.StripeClient | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> stripe.StripeClient:
        if self._api_key is None:
            raise PaymentsNotConfigured("Payments are not configured: set STRIPE_SECRET_KEY")
        import stripe

        with self._lock:
            if self._client is None:
                bases: dict[str, str] = (
                    {"api": self._api_base.rstrip("/")} if self._api_base else {}
                )
                self._client = stripe.StripeClient(
                    self._api_key,
                    stripe_version=self._api_version,
                    base_addresses=bases,  # type: ignore[arg-type]
                    # The SDK waits 80 s by default: far past a push's acknowledgement deadline.
                    http_client=stripe.RequestsClient(timeout=self._timeout),
                    max_network_retries=2,
                )
            return self._client

    def create_checkout_session(self, params: dict[str, Any]) -> str | None:
        """The hosted checkout URL; None when Stripe refuses (the route answers `{"url": null}`).

        Raises PaymentsUnavailable when Stripe is down or slow: that is no refusal.
        """
        with _refusal_as_none("checkout session"):
            return self.client.v1.checkout.sessions.create(params=params).url  # type: ignore[arg-type]
        return None

    def create_portal_session(self, *, customer_id: str, return_url: str) -> str | None:
        """The customer portal URL for a Stripe customer; None when Stripe refuses."""
        with _refusal_as_none("portal session"):
            return self.client.v1.billing_portal.sessions.create(
                params={"customer": customer_id, "return_url": return_url}
            ).url
        return None

    def checkout_facts(self, session_id: str) -> CheckoutFacts:
        """The price and the hosted invoice or receipt of a checkout, in one call."""
        import stripe

        try:
            session = self.client.v1.checkout.sessions.retrieve(
                session_id,
                params={"expand": _SESSION_EXPANDED},
            ).to_dict()
        except stripe.StripeError as exc:
            raise StripeCallFailed(f"checkout session {session_id}: {exc}") from exc
        return CheckoutFacts(
            price_id=_first_price(session),
            receipt_url=_receipt_url(session),
            quantity=checkout_quantity(session),
            trial=subscription_trial(session.get("subscription")),
        )

    def checkout_session(self, session_id: str) -> dict[str, Any] | None:
        """A checkout session as Stripe has it now, with what the access cycle reads expanded
        (its line items: the price; its invoice and payment: the receipt); None when Stripe
        knows no such session. Raises PaymentsUnavailable when Stripe is down or slow."""
        import stripe

        try:
            return self.client.v1.checkout.sessions.retrieve(
                session_id,
                params={"expand": _SESSION_EXPANDED},
            ).to_dict()
        except stripe.InvalidRequestError as exc:
            if exc.http_status == 404:
                return None
            raise StripeCallFailed(f"checkout session {session_id}: {exc}") from exc
        except (stripe.APIConnectionError, stripe.RateLimitError, stripe.APIError) as exc:
            raise PaymentsUnavailable(f"Stripe is unavailable: {type(exc).__name__}") from exc
        except stripe.StripeError as exc:
            raise StripeCallFailed(f"checkout session {session_id}: {exc}") from exc

    def has_checkout_for(self, payment_intent: str) -> bool:
        """Whether a checkout session was paid with this payment intent."""
        found = self.client.v1.checkout.sessions.list(
            params={"payment_intent": payment_intent, "limit": 1}
        )
        return bool(found.data)

    def event(self, event_id: str) -> dict[str, Any] | None:
        """One event as Stripe sent it (it keeps 30 days); None when Stripe knows no such
        event (one made up locally, by `events send`). Raises PaymentsUnavailable when Stripe is
        down or slow."""
        import stripe

        try:
            return self.client.v1.events.retrieve(event_id).to_dict(for_json=True)
        except stripe.InvalidRequestError as exc:
            if exc.http_status == 404:
                return None
            raise StripeCallFailed(f"event {event_id}: {exc}") from exc
        except (stripe.APIConnectionError, stripe.RateLimitError, stripe.APIError) as exc:
            raise PaymentsUnavailable(f"Stripe is unavailable: {type(exc).__name__}") from exc
        except stripe.StripeError as exc:
            raise StripeCallFailed(f"event {event_id}: {exc}") from exc

    def events_since(self, *, created_gte: int, types: list[str]) -> Iterator[dict[str, Any]]:
        """Stripe's events of these types created since then (it keeps 30 days), every page."""
        pages = self.client.v1.events.list(
            params={"created": {"gte": created_gte}, "types": types, "limit": 100}
        )
        for event in pages.auto_paging_iter():
            yield event.to_dict(for_json=True)

    def active_catalogue(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every active product and every active price, all pages of each."""
        products = self.client.v1.products.list(params={"active": True, "limit": 100})
        prices = self.client.v1.prices.list(params={"active": True, "limit": 100})
        return (
            [p.to_dict() for p in products.auto_paging_iter()],
            [p.to_dict() for p in prices.auto_paging_iter()],
        )

    def product_features(self, product_id: str) -> tuple[list[str], dict[str, str]]:
        """A product's Stripe Entitlements features, all pages: their lookup keys, and their
        display names by key."""
        found = self.client.v1.products.features.list(product_id, params={"limit": 100})
        listed = [f.to_dict() for f in found.auto_paging_iter()]
        return lookup_keys(listed), display_names(listed)

    def product_now(self, product_id: str) -> StripeProduct | None:
        """A product as Stripe holds it now, with every price of it (active or not) and its
        features; None when Stripe no longer has it."""
        import stripe

        try:
            product = self.client.v1.products.retrieve(product_id).to_dict()
        except stripe.InvalidRequestError as exc:
            if exc.http_status == 404:
                return None
            raise
        prices = self.client.v1.prices.list(params={"product": product_id, "limit": 100})
        keys, names = self.product_features(product_id)
        return StripeProduct(
            product=product,
            prices=[p.to_dict() for p in prices.auto_paging_iter()],
            features=keys,
            feature_names=names,
        )

    def set_subscription_quantity(self, subscription_id: str, quantity: int) -> bool:
        """Bill the subscription's (first) item for `quantity`, prorated; False when Stripe
        refuses (Stripe then sends customer.subscription.updated with the new quantity)."""
        with _refusal_as_none("quantity change"):
            subscription = self.client.v1.subscriptions.retrieve(subscription_id)
            item = subscription["items"]["data"][0]["id"]
            self.client.v1.subscriptions.update(
                subscription_id,
                params={
                    "items": [{"id": item, "quantity": quantity}],
                    "proration_behavior": "create_prorations",
                },
            )
            return True
        return False

    # Plan changes (billing/plan_change.py): each raises PaymentsUnavailable when Stripe is
    # down or slow, StripeCallFailed when it refuses.

    def subscription(self, subscription_id: str) -> dict[str, Any]:
        """A subscription as Stripe holds it now, its schedule and discounts expanded."""
        with _stripe_errors(f"subscription {subscription_id}"):
            return self.client.v1.subscriptions.retrieve(
                subscription_id, params={"expand": ["schedule", "discounts"]}
            ).to_dict()

    def price(self, price_id: str) -> dict[str, Any]:
        with _stripe_errors(f"price {price_id}"):
            return self.client.v1.prices.retrieve(price_id).to_dict()

    def preview_invoice(self, params: dict[str, Any]) -> dict[str, Any]:
        """`invoices.create_preview`: what an invoice would be; nothing changes."""
        with _stripe_errors("invoice preview"):
            return self.client.v1.invoices.create_preview(params=params).to_dict()  # type: ignore[arg-type]

    def update_subscription(
        self, subscription_id: str, params: dict[str, Any], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if idempotency_key is not None:
            options["idempotency_key"] = idempotency_key
        with _stripe_errors(f"subscription {subscription_id}"):
            return self.client.v1.subscriptions.update(
                subscription_id,
                params=params,  # type: ignore[arg-type]
                options=options,  # type: ignore[arg-type]
            ).to_dict()

    def schedule_from(self, subscription_id: str) -> dict[str, Any]:
        """A subscription schedule holding the subscription's current phase."""
        with _stripe_errors(f"schedule of {subscription_id}"):
            return self.client.v1.subscription_schedules.create(
                params={"from_subscription": subscription_id}
            ).to_dict()

    def update_schedule(self, schedule_id: str, params: dict[str, Any]) -> dict[str, Any]:
        with _stripe_errors(f"schedule {schedule_id}"):
            return self.client.v1.subscription_schedules.update(
                schedule_id,
                params=params,  # type: ignore[arg-type]
            ).to_dict()

    def release_schedule(self, schedule_id: str) -> dict[str, Any]:
        """The schedule lets go of its subscription, which goes on as it is now."""
        with _stripe_errors(f"schedule {schedule_id}"):
            return self.client.v1.subscription_schedules.release(schedule_id).to_dict()

    def coupon(self, coupon_id: str) -> dict[str, Any]:
        with _stripe_errors(f"coupon {coupon_id}"):
            return self.client.v1.coupons.retrieve(coupon_id).to_dict()

    def meter_event(
        self, *, identifier: str, event_name: str, customer_id: str, value: int, timestamp: int
    ) -> None:
        """Report `value` units of usage for `customer_id` on the meter of `event_name`.
        `identifier` is the consumption's key: Stripe counts one event per identifier, and the
        same key as the request's idempotency key makes a retried call answer the first one.
        Stripe validates the event against its meter later; a problem there comes back as a
        `v1.billing.meter.error_report_triggered` event."""
        self.client.v1.billing.meter_events.create(
            params={
                "event_name": event_name,
                "identifier": identifier,
                "timestamp": timestamp,
                "payload": {"stripe_customer_id": customer_id, "value": str(value)},
            },
            options={"idempotency_key": f"meter-{identifier}"},
        )

    def default_payment_method(self, customer_id: str) -> str | None:
        """The customer's saved default payment method (`invoice_settings.default_payment_method`),
        None when it has none or Stripe does not know the customer. Raises PaymentsUnavailable
        when Stripe is down."""
        import stripe

        with _stripe_errors(f"customer {customer_id}"):
            try:
                found = self.client.v1.customers.retrieve(customer_id)
            except stripe.InvalidRequestError as exc:
                if exc.http_status == 404:
                    return None
                raise
            settings = found.to_dict().get("invoice_settings") or {}
            method = settings.get("default_payment_method")
            if isinstance(method, dict):
                method = method.get("id")
            return method if isinstance(method, str) and method else None

    def charge_off_session(
        self,
        *,
        customer_id: str,
        payment_method: str,
        amount: int,
        currency: str,
        description: str,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> OffSessionCharge:
        """Charge `amount` (in the currency's smallest unit) on the customer's saved payment
        method without them present (a PaymentIntent with `off_session` and `confirm`). The
        idempotency key makes a retry answer the first call's intent, never a second charge. A
        decline or a charge needing the customer's authentication is an answer (its `status`
        and `code`), not an error; raises PaymentsUnavailable when Stripe is down, and
        StripeCallFailed when it refuses the request itself."""
        import stripe

        with _stripe_errors(f"off-session charge of {customer_id}"):
            try:
                intent = self.client.v1.payment_intents.create(
                    params={
                        "amount": amount,
                        "currency": currency,
                        "customer": customer_id,
                        "payment_method": payment_method,
                        "off_session": True,
                        "confirm": True,
                        "description": description,
                        "metadata": metadata,
                    },
                    options={"idempotency_key": idempotency_key},
                )
            except stripe.CardError as exc:
                body = exc.json_body if isinstance(exc.json_body, dict) else {}
                error = body.get("error") or {}
                refused = error.get("payment_intent") or {}
                return OffSessionCharge(
                    id=refused.get("id") if isinstance(refused, dict) else None,
                    status=str(refused.get("status") or "requires_payment_method")
                    if isinstance(refused, dict)
                    else "requires_payment_method",
                    code=str(exc.code or error.get("code") or "card_declined"),
                )
        return OffSessionCharge(id=str(intent.id), status=str(intent.status), code=None)

    def thin_event(self, event_id: str) -> dict[str, Any] | None:
        """A thin (`v2.core.event`) event with its `data`, as `GET /v2/core/events/{id}`
        answers it; None when Stripe does not know it."""
        import stripe

        try:
            found = self.client.v2.core.events.retrieve(event_id)
        except stripe.InvalidRequestError as exc:
            if exc.http_status == 404:
                return None
            raise
        return dict(found.to_dict())

    def subscription_status(self, subscription_id: str) -> str:
        """The current status of a subscription, as Stripe sees it now."""
        return str(self.client.v1.subscriptions.retrieve(subscription_id).status)

    def subscription_now(self, subscription_id: str) -> tuple[str, str | None]:
        """A subscription's status and the price of its (first) item, as Stripe has them now:
        what settles two of its events in the same second."""
        found = self.client.v1.subscriptions.retrieve(subscription_id).to_dict()
        items = (found.get("items") or {}).get("data") or []
        price = items[0].get("price") if items else None
        price_id = price.get("id") if isinstance(price, dict) else price
        return str(found.get("status")), str(price_id) if price_id else None

    def cancel_subscription_now(self, subscription_id: str) -> bool:
        """Cancel a subscription at once (Stripe: `DELETE /v1/subscriptions/{id}`); False when
        there was nothing to cancel (ended already, or unknown to Stripe). It is read first, so
        a retry after a crash sends no second cancellation. Raises PaymentsUnavailable when
        Stripe is down or slow, StripeCallFailed when it refuses."""
        import stripe

        with _stripe_errors(f"subscription {subscription_id}"):
            try:
                found = self.client.v1.subscriptions.retrieve(subscription_id)
            except stripe.InvalidRequestError as exc:
                if exc.http_status == 404:
                    return False
                raise
            if found.status in ENDED_SUBSCRIPTION:
                return False
            self.client.v1.subscriptions.cancel(subscription_id)
        return True

    def create_redaction_job(
        self, customer_id: str, *, api_version: str, idempotency_key: str
    ) -> dict[str, Any]:
        """Ask Stripe to redact a customer's personal data: a redaction job
        (`POST /v1/privacy/redaction_jobs`, a preview API: only an account in the preview may,
        under the preview API version it names). The idempotency key makes a retry answer the
        job made the first time. Raises StripeCallFailed when Stripe refuses (an account not
        in the preview), PaymentsUnavailable when it is down."""
        with _stripe_errors(f"redaction of {customer_id}"):
            return self._raw(
                "post",
                "/v1/privacy/redaction_jobs",
                api_version,
                idempotency_key=idempotency_key,
                validation_behavior="fix",
                objects={"customers": [customer_id]},
            )

    def redaction_job(self, job_id: str, *, api_version: str) -> dict[str, Any]:
        """A redaction job as Stripe holds it now (its `status`)."""
        with _stripe_errors(f"redaction job {job_id}"):
            return self._raw("get", f"/v1/privacy/redaction_jobs/{job_id}", api_version)

    def run_redaction_job(self, job_id: str, *, api_version: str) -> dict[str, Any]:
        """Run a redaction job that Stripe validated (`ready`): the redaction starts."""
        with _stripe_errors(f"redaction job {job_id}"):
            return self._raw("post", f"/v1/privacy/redaction_jobs/{job_id}/run", api_version)

    def _raw(
        self,
        method: str,
        path: str,
        api_version: str,
        idempotency_key: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """A call the SDK has no method for (a preview API), under `api_version`."""
        options: dict[str, Any] = {"stripe_version": api_version}
        if idempotency_key is not None:
            options["idempotency_key"] = idempotency_key
        response = self.client.raw_request(method, path, **params, **options)
        found: dict[str, Any] = self.client.deserialize(response, api_mode="V1").to_dict()
        return found


# A subscription in these statuses has ended: there is nothing left to cancel.
ENDED_SUBSCRIPTION = frozenset({"canceled", "incomplete_expired"})


@contextmanager
def _stripe_errors(what: str) -> Iterator[None]:
    """Outages as PaymentsUnavailable (the same call may succeed later), refusals as
    StripeCallFailed."""
    import stripe

    try:
        yield
    except (stripe.APIConnectionError, stripe.RateLimitError, stripe.APIError) as exc:
        raise PaymentsUnavailable(f"Stripe is unavailable: {type(exc).__name__}") from exc
    except stripe.StripeError as exc:
        raise StripeCallFailed(f"{what}: {exc.user_message or exc}") from exc


@contextmanager
def _refusal_as_none(what: str) -> Iterator[None]:
    """Swallow Stripe's refusals (logged); turn outages into PaymentsUnavailable."""
    import stripe

    # Errors that say nothing about the request itself: the same call may succeed later.
    outages = (stripe.APIConnectionError, stripe.RateLimitError, stripe.APIError)
    try:
        yield
    except outages as exc:
        log.error("stripe unavailable for the %s: %s", what, type(exc).__name__)
        raise PaymentsUnavailable(f"Stripe is unavailable: {type(exc).__name__}") from exc
    except stripe.StripeError as exc:
        log.error("stripe refused the %s: %s", what, exc.user_message or exc)


@dataclass(frozen=True)
class OffSessionCharge:
    """What an off-session charge answered: its payment intent (None when Stripe made none),
    the intent's status (`succeeded`, `processing`, `requires_action`, ...) and, when the card
    was refused, Stripe's error code (`card_declined`, `authentication_required`)."""

    id: str | None
    status: str
    code: str | None


@dataclass(frozen=True)
class CheckoutFacts:
    price_id: str | None
    receipt_url: str | None
    quantity: int | None = None  # the line item's: a per-seat price's seats
    trial: Trial | None = None  # the free trial its subscription is on


# What a checkout session is read with: its line items (the price), its invoice and payment
# (the receipt), its subscription (a free trial's end and first charge).
_SESSION_EXPANDED = ["line_items", "invoice", "payment_intent.latest_charge", "subscription"]


def _first_price(session: dict[str, Any]) -> str | None:
    items = (session.get("line_items") or {}).get("data") or []
    price = items[0].get("price") if items else None
    return price.get("id") if isinstance(price, dict) else price


def _receipt_url(session: dict[str, Any]) -> str | None:
    """The invoice's hosted page (subscriptions, or invoice creation on), else the receipt."""
    invoice = session.get("invoice")
    if isinstance(invoice, dict) and invoice.get("hosted_invoice_url"):
        return str(invoice["hosted_invoice_url"])
    intent = session.get("payment_intent")
    charge = intent.get("latest_charge") if isinstance(intent, dict) else None
    if isinstance(charge, dict) and charge.get("receipt_url"):
        return str(charge["receipt_url"])
    return None


class SignatureError(ValueError):
    """The webhook signature header does not match the body."""


def verify_signature(
    payload: bytes, header: str | None, *, secret: str, tolerance: int = 300
) -> None:
    """Check Stripe's signature on the raw body (HMAC only: no object tree is built)."""
    if not header:
        raise SignatureError("Missing Stripe-Signature header")
    signed_at = _signed_at(header)
    import stripe

    try:
        stripe.WebhookSignature.verify_header(payload.decode("utf-8"), header, secret, tolerance)
    except UnicodeDecodeError as exc:
        raise SignatureError("Webhook body is not UTF-8") from exc
    except stripe.SignatureVerificationError as exc:
        raise SignatureError(str(exc.user_message or exc)) from exc
    # The SDK refuses only the past; a signature dated ahead would stay replayable for as long.
    if abs(time.time() - signed_at) > tolerance:
        raise SignatureError("Timestamp outside the tolerance zone")


def _signed_at(header: str) -> int:
    """The header's one `t=`: the timestamp the SDK signs the body with, read as it reads it.

    The SDK takes the first item named exactly `t`; a second `t` (or one with spaces around its
    name) could then be read here as another time than the one the signature covers, so a
    header naming more than one is refused before anything else is.
    """
    if not header.isascii():
        # Checked first: the SDK compares signatures with `hmac.compare_digest`, which raises
        # TypeError on a non-ASCII string.
        raise SignatureError("Stripe-Signature header is not ASCII")
    items = [item.split("=", 2) for item in header.split(",")]
    timestamps = [item[1] for item in items if item[0].strip() == "t" and len(item) > 1]
    if len(timestamps) > 1:
        raise SignatureError("Stripe-Signature header carries more than one timestamp (t=)")
    try:
        return int(timestamps[0])
    except (IndexError, ValueError) as exc:
        raise SignatureError("Unable to extract timestamp and signatures from header") from exc


def sign(payload: bytes, *, secret: str, timestamp: int) -> str:
    """The `Stripe-Signature` header Stripe would send with `payload` (for local sample events)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"
