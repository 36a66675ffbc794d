"""The benchmark's floor: the webhook route answering right after the signature check.

Benchmark only (`gunicorn bench.floor_app:app`): the same verification function the service
calls, on a bare Flask app, so the figures show what everything after verification costs.
"""

from __future__ import annotations

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

from adapters.stripe_api import SignatureError, verify_signature
from config import DEV_WEBHOOK_SECRET
from events.intake import TOLERANCE_SECONDS

app = Flask(__name__)


@app.post("/api/webhook/payments")
def webhook() -> ResponseReturnValue:
    try:
        verify_signature(
            request.get_data(cache=False),
            request.headers.get("Stripe-Signature"),
            secret=DEV_WEBHOOK_SECRET,
            tolerance=TOLERANCE_SECONDS,
        )
    except SignatureError as exc:
        return jsonify(error=str(exc)), 400
    return jsonify({})


@app.get("/healthz")
def healthz() -> ResponseReturnValue:
    return jsonify(status="ok")
