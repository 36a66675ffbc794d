"""A local stand-in for the slice of Stripe's API this service calls, for `make run`/`make demo`
without an account: checkout and portal sessions (URLs that lead back here, to a page saying
what to do instead of paying), a session read back with its line items, a subscription's status.

It is not Stripe: nothing is charged and no event is sent by it. The events a real checkout
would cause are sent with `flask --app main events send` (or `stripe listen` in test mode).
"""

from __future__ import annotations

import contextlib
import copy
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

from dev.samples import catalogue

API_KEY = "sk_test_local_stand_in"  # not a secret: the stand-in checks nothing

_ROUTES = Map(
    [
        Rule("/v1/checkout/sessions", methods=["POST"], endpoint="create_session"),
        Rule("/v1/checkout/sessions/<sid>", methods=["GET"], endpoint="get_session"),
        Rule("/v1/billing_portal/sessions", methods=["POST"], endpoint="create_portal"),
        Rule("/v1/subscriptions/<sid>", methods=["GET"], endpoint="get_subscription"),
        Rule("/v1/products", methods=["GET"], endpoint="list_products"),
        Rule("/v1/products", methods=["POST"], endpoint="create_product"),
        Rule("/v1/products/<pid>", methods=["GET"], endpoint="get_product"),
        Rule("/v1/products/<pid>", methods=["POST"], endpoint="update_product"),
        Rule("/v1/products/<pid>/features", methods=["GET"], endpoint="list_features"),
        Rule("/v1/prices", methods=["GET"], endpoint="list_prices"),
        Rule("/v1/prices", methods=["POST"], endpoint="create_price"),
        Rule("/v1/prices/<pid>", methods=["POST"], endpoint="update_price"),
        Rule("/pay/<sid>", methods=["GET"], endpoint="pay_page"),
        Rule("/portal", methods=["GET"], endpoint="portal_page"),
    ]
)


class StripeStandIn:
    """A WSGI app keeping the checkout sessions it created, by id."""

    def __init__(self) -> None:
        self.url = ""
        self.sessions: dict[str, dict[str, Any]] = {}
        # The catalogue, by id (a copy: a change made here stays with this run).
        self.products = {p["id"]: copy.deepcopy(p) for p in catalogue.PRODUCTS}
        self.prices = {p["id"]: copy.deepcopy(p) for p in catalogue.PRICES}
        self.features = copy.deepcopy(catalogue.FEATURES)

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

    # The catalogue: the demo products of `dev/samples/catalogue.py`, listed and paged as Stripe
    # lists them, so `products sync` (and a product or price event) reads them as it reads
    # Stripe's. Products and prices are created and updated (`active=false` archives) with
    # Stripe's parameters, for a founder to try a product of their own.

    def list_products(self, request: Request) -> Response:
        return _listed(request, list(self.products.values()), "/v1/products")

    def get_product(self, request: Request, pid: str) -> Response:
        if pid not in self.products:
            raise NotFound()
        return _json(self.products[pid])

    def list_features(self, request: Request, pid: str) -> Response:
        found = self.features.get(pid, [])
        return _listed(request, found, f"/v1/products/{pid}/features")

    def create_product(self, request: Request) -> Response:
        form = _form(request)
        pid = f"prod_local_{secrets.token_hex(6)}"
        found = catalogue.product(
            pid, form.get("name", ""), form.get("description", ""), _nested(form, "metadata")
        )
        self.products[pid] = found
        return self.update_product(request, pid)

    def update_product(self, request: Request, pid: str) -> Response:
        found = self.products.get(pid)
        if found is None:
            raise NotFound()
        form = _form(request)
        found["metadata"] = {**found["metadata"], **_nested(form, "metadata")}
        found.update({k: form[k] for k in ("name", "description") if k in form})
        if "active" in form:
            found["active"] = form["active"] == "true"
        return _json(found)

    def create_price(self, request: Request) -> Response:
        form = _form(request)
        if form.get("product") not in self.products:
            raise NotFound()
        pid = f"price_local_{secrets.token_hex(6)}"
        interval = _nested(form, "recurring").get("interval")
        found = catalogue.price(pid, form["product"], int(form.get("unit_amount", 0)), interval)
        found.update({"currency": form.get("currency", "usd"), "nickname": form.get("nickname")})
        self.prices[pid] = found
        return _json(found)

    def update_price(self, request: Request, pid: str) -> Response:
        found = self.prices.get(pid)
        if found is None:
            raise NotFound()
        form = _form(request)
        if "active" in form:
            found["active"] = form["active"] == "true"
        return _json(found)

    def list_prices(self, request: Request) -> Response:
        product = request.args.get("product")
        found = [p for p in self.prices.values() if product in (None, p["product"])]
        return _listed(request, found, "/v1/prices")

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


def _form(request: Request) -> dict[str, str]:
    return dict(parse_qsl(request.get_data(as_text=True), keep_blank_values=True))


def _listed(request: Request, objects: list[dict[str, Any]], url: str) -> Response:
    """A page as Stripe lists one: `active` filters, `starting_after` is the last id seen,
    `limit` (10 unless said) sizes the page and `has_more` says whether another follows."""
    active = request.args.get("active")
    found = [o for o in objects if active is None or str(o.get("active")).lower() == active]
    after = request.args.get("starting_after")
    if after:
        ids = [o["id"] for o in found]
        found = found[ids.index(after) + 1 :] if after in ids else []
    limit = int(request.args.get("limit", 10))
    page = {"object": "list", "url": url, "has_more": len(found) > limit, "data": found[:limit]}
    return _json(page)


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")
