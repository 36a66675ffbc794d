"""A local stand-in for the slice of Stripe's API this service calls, for `make run`/`make demo`
without an account: checkout and portal sessions (URLs that lead back here, to a page saying
what to do instead of paying), a session read back with its line items, a subscription's status.

It is not Stripe: nothing is charged and no event is sent by it. The events a real checkout
would cause are sent with `flask --app main events send` (or `stripe listen` in test mode).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

API_KEY = "sk_test_local_stand_in"  # not a secret: the stand-in checks nothing

_ROUTES = Map(
    [
        Rule("/v1/checkout/sessions", methods=["POST"], endpoint="create_session"),
        Rule("/v1/checkout/sessions/<sid>", methods=["GET"], endpoint="get_session"),
        Rule("/v1/billing_portal/sessions", methods=["POST"], endpoint="create_portal"),
        Rule("/v1/subscriptions/<sid>", methods=["GET"], endpoint="get_subscription"),
        Rule("/pay/<sid>", methods=["GET"], endpoint="pay_page"),
        Rule("/portal", methods=["GET"], endpoint="portal_page"),
    ]
)


class StripeStandIn:
    """A WSGI app keeping the checkout sessions it created, by id."""

    def __init__(self) -> None:
        self.url = ""
        self.sessions: dict[str, dict[str, Any]] = {}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            endpoint, args = _ROUTES.bind_to_environ(environ).match()
            response = getattr(self, endpoint)(request, **args)
        except HTTPException:
            response = _json(
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"No such resource: {request.path}",
                    }
                },
                404,
            )
        return response(environ, start_response)

    def create_session(self, request: Request) -> Response:
        form = dict(parse_qsl(request.get_data(as_text=True), keep_blank_values=True))
        # Random, as Stripe's are: a counter started again with each `make run`, and a kept
        # database then met the same checkout id twice (the second purchase not recorded).
        sid = f"cs_test_local_{secrets.token_hex(12)}"
        session = {
            "id": sid,
            "object": "checkout.session",
            "client_reference_id": form.get("client_reference_id"),
            "customer": form.get("customer"),
            "customer_email": form.get("customer_email"),
            "metadata": _nested(form, "metadata"),
            "mode": form.get("mode"),
            "payment_status": "unpaid",
            "status": "open",
            "url": f"{self.url}/pay/{sid}",
            "line_items_price": form.get("line_items[0][price]"),
        }
        self.sessions[sid] = session
        return _json({k: v for k, v in session.items() if k != "line_items_price"})

    def get_session(self, request: Request, sid: str) -> Response:
        session = self.sessions.get(sid)
        if session is None:
            raise NotFound()
        price = {"id": session["line_items_price"], "object": "price"}
        items = {"object": "list", "data": [{"object": "item", "quantity": 1, "price": price}]}
        return _json({**session, "line_items": items})

    def create_portal(self, request: Request) -> Response:
        form = dict(parse_qsl(request.get_data(as_text=True)))
        return _json(
            {
                "id": "bps_local",
                "object": "billing_portal.session",
                "customer": form.get("customer"),
                "return_url": form.get("return_url"),
                "url": f"{self.url}/portal",
            }
        )

    def get_subscription(self, request: Request, sid: str) -> Response:
        return _json({"id": sid, "object": "subscription", "status": "active"})

    def pay_page(self, request: Request, sid: str) -> Response:
        text = (
            "This is the local Stripe stand-in: nothing is paid here.\n"
            "Send the event Stripe would send instead:\n"
            "  uv run flask --app main events send checkout.session.completed"
            f" --session {sid} --email YOU@example.com\n"
        )
        return Response(text, content_type="text/plain; charset=utf-8")

    def portal_page(self, request: Request) -> Response:
        text = (
            "This is the local Stripe stand-in: there is no customer portal here.\n"
            "Send the events a change in the portal would cause instead, for example:\n"
            "  uv run flask --app main events send customer.subscription.deleted"
            " --email YOU@example.com\n"
        )
        return Response(text, content_type="text/plain; charset=utf-8")


@contextlib.contextmanager
def running() -> Iterator[StripeStandIn]:
    """The stand-in on a free loopback port, for the duration of the block."""
    app = StripeStandIn()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    app.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, name="stripe-stand-in", daemon=True)
    thread.start()
    try:
        yield app
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _nested(form: dict[str, str], name: str) -> dict[str, str]:
    prefix = f"{name}["
    return {k[len(prefix) : -1]: v for k, v in form.items() if k.startswith(prefix)}


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")
