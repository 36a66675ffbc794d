"""POST /api/webhook/payments."""

from __future__ import annotations

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from api.deps import container
from api.operations import COMMON, EmptyAnswer, documented
from api.parsing import whole_body
from config import secret
from credits import store as credits
from events.intake import MeterEvents, receive

bp = Blueprint("webhook", __name__)

# Stripe's events stay well under this; the other routes keep the app's small default.
MAX_EVENT_BYTES = 1024 * 1024


@bp.post("/api/webhook/payments")
@documented(
    "Stripe's signed events",
    {200: EmptyAnswer, **COMMON},
    headers=("Stripe-Signature",),
)
def payments_webhook() -> ResponseReturnValue:
    c = container()
    request.max_content_length = MAX_EVENT_BYTES
    receive(
        payload=whole_body(cache=False),
        # Stripe sends `Stripe-Signature`; the API's contract also names it `payments-signature`.
        signature=request.headers.get("Stripe-Signature")
        or request.headers.get("payments-signature"),
        secret=c.settings.webhook_secret,
        livemode=c.settings.stripe_livemode,
        bus=c.bus,
        meters=MeterEvents(
            secret=secret(c.settings.stripe_meter_events_secret),
            fetch=c.stripe.thin_event,
            customers=lambda keys: credits.customers_of(c.db, keys),
        ),
    )
    return jsonify({})
