"""Stripe's API as documented, for the SDK to talk to: only what this service calls."""

from __future__ import annotations

import datetime
import functools
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from tests.fakes.http import FakeServer, decode_stripe_form, json_response


@dataclass
class FakeStripe:
    server: FakeServer = field(default_factory=FakeServer)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    subscription_status: dict[str, str] = field(default_factory=dict)
    # Subscription id -> its one item's quantity (a per-seat plan's seats); set to let
    # `POST /v1/subscriptions/<id>` change it.
    quantities: dict[str, int] = field(default_factory=dict)
    # Events as `GET /v1/events` lists them, newest first.
    events: list[dict[str, Any]] = field(default_factory=list)
    # The catalogue: products and prices by id, `product_feature` objects by product id.
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    prices: dict[str, dict[str, Any]] = field(default_factory=dict)
    features: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    refuse_checkout: bool = False
    refuse_portal: bool = False
    # Stripe failing on its side: every call answers 500 api_error.
    outage: bool = False
    # Cleared, Stripe answers nothing until it is set again (a slow API, as seen from here).
    responding: threading.Event = field(default_factory=threading.Event)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.responding.set()
        routes: list[tuple[str, tuple[str, ...], Callable[..., Response]]] = [
            ("/v1/checkout/sessions", ("POST",), self._create_session),
            ("/v1/checkout/sessions/<session_id>", ("GET",), self._get_session),
            ("/v1/billing_portal/sessions", ("POST",), self._create_portal),
            ("/v1/subscriptions/<sub_id>", ("GET",), self._get_subscription),
            ("/v1/subscriptions/<sub_id>", ("POST",), self._update_subscription),
            ("/v1/checkout/sessions", ("GET",), self._list_sessions),
            ("/v1/events", ("GET",), self._list_events),
            ("/v1/products", ("GET",), self._list_products),
            ("/v1/products/<product_id>", ("GET",), self._get_product),
            ("/v1/products/<product_id>/features", ("GET",), self._list_features),
            ("/v1/prices", ("GET",), self._list_prices),
        ]
        for rule, methods, handler in routes:
            self.server.route(rule, methods, _versioned(handler))

    def reset(self) -> None:
        self.server.reset()
        self.sessions.clear()
        self.subscription_status.clear()
        self.quantities.clear()
        self.events.clear()
        self.products.clear()
        self.prices.clear()
        self.features.clear()
        self.refuse_checkout = False
        self.refuse_portal = False
        self.outage = False
        self.responding.set()

    def checkout_params(self) -> list[dict[str, Any]]:
        """The decoded parameters of every checkout session created."""
        return [r.form() for r in self.server.calls("POST", "/v1/checkout/sessions")]

    def _create_session(self, request: Request) -> Response:
        if self.outage:
            return _api_error()
        if self.refuse_checkout:
            return json_response(
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": "No such price",
                        "param": "line_items[0][price]",
                    }
                },
                status=400,
            )
        session_id = f"cs_test_{next(self._ids)}"
        return json_response(
            {
                "id": session_id,
                "object": "checkout.session",
                "url": f"https://checkout.stripe.com/c/pay/{session_id}",
                "mode": request.form.get("mode"),
                "status": "open",
            }
        )

    def _get_session(self, request: Request, session_id: str) -> Response:
        session = self.sessions.get(session_id)
        if session is None:
            return json_response(
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"No such checkout.session: '{session_id}'",
                    }
                },
                404,
            )
        return json_response(session)

    def _create_portal(self, request: Request) -> Response:
        if self.outage:
            return _api_error()
        if self.refuse_portal:
            message = (
                "No configuration provided and your test mode default configuration"
                " has not been created."
            )
            return json_response(
                {"error": {"type": "invalid_request_error", "message": message}}, 400
            )
        return json_response(
            {
                "id": "bps_test_1",
                "object": "billing_portal.session",
                "customer": request.form.get("customer"),
                "return_url": request.form.get("return_url"),
                "url": "https://billing.stripe.com/p/session/test_portal",
            }
        )

    def _get_subscription(self, request: Request, sub_id: str) -> Response:
        self.responding.wait(timeout=30)
        if self.outage:
            return _api_error()
        return json_response(self._subscription(sub_id))

    def _subscription(self, sub_id: str) -> dict[str, Any]:
        found: dict[str, Any] = {
            "id": sub_id,
            "object": "subscription",
            "status": self.subscription_status.get(sub_id, "active"),
        }
        if sub_id in self.quantities:
            item = {"id": f"si_{sub_id}", "object": "subscription_item"}
            found["items"] = {
                "object": "list",
                "data": [{**item, "quantity": self.quantities[sub_id]}],
                "has_more": False,
                "url": f"/v1/subscription_items?subscription={sub_id}",
            }
        return found

    def _update_subscription(self, request: Request, sub_id: str) -> Response:
        """Items' quantities, as `items[0][id]` and `items[0][quantity]` name them."""
        if self.outage:
            return _api_error()
        if sub_id not in self.quantities:
            return json_response(
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"No such subscription: '{sub_id}'",
                    }
                },
                404,
            )
        form = decode_stripe_form(list(request.form.items(multi=True)))
        for item in form.get("items") or []:
            if item.get("id") == f"si_{sub_id}" and "quantity" in item:
                self.quantities[sub_id] = int(item["quantity"])
        return json_response(self._subscription(sub_id))

    def _list_sessions(self, request: Request) -> Response:
        intent = request.args.get("payment_intent")
        found = [s for s in self.sessions.values() if intent and s.get("payment_intent") == intent]
        return _page(found[: int(request.args.get("limit", 10))], "/v1/checkout/sessions", False)

    def _list_events(self, request: Request) -> Response:
        """Newest first, `created[gte]` and `types[]` filters, cursor after `starting_after`."""
        gte = int(request.args.get("created[gte]", 0))
        # The SDK sends arrays indexed (`types[0]=...`), as Stripe's form encoding allows.
        types = {v for k, v in request.args.items(multi=True) if k.startswith("types[")} or None
        found = [
            e for e in self.events if e["created"] >= gte and (types is None or e["type"] in types)
        ]
        after = request.args.get("starting_after")
        if after:
            found = found[[e["id"] for e in found].index(after) + 1 :]
        limit = int(request.args.get("limit", 10))
        return _page(found[:limit], "/v1/events", len(found) > limit)

    def _list_products(self, request: Request) -> Response:
        return _listed(request, list(self.products.values()), "/v1/products")

    def _get_product(self, request: Request, product_id: str) -> Response:
        if product_id not in self.products:
            error = {"type": "invalid_request_error", "message": f"No such product: '{product_id}'"}
            return json_response({"error": {**error, "param": "id"}}, 404)
        return json_response(self.products[product_id])

    def _list_features(self, request: Request, product_id: str) -> Response:
        found = self.features.get(product_id, [])
        return _listed(request, found, f"/v1/products/{product_id}/features")

    def _list_prices(self, request: Request) -> Response:
        product = request.args.get("product")
        found = [p for p in self.prices.values() if product in (None, p["product"])]
        return _listed(request, found, "/v1/prices")


def _listed(request: Request, objects: list[dict[str, Any]], url: str) -> Response:
    """A list as Stripe pages it: `active` filters, `starting_after` is the last id the caller
    saw, `limit` (10 unless said) sizes the page, `has_more` says another page follows."""
    active = request.args.get("active")
    found = [o for o in objects if active is None or str(o.get("active")).lower() == active]
    after = request.args.get("starting_after")
    if after:
        found = found[[o["id"] for o in found].index(after) + 1 :]
    limit = int(request.args.get("limit", 10))
    return _page(found[:limit], url, len(found) > limit)


def _page(data: list[dict[str, Any]], url: str, has_more: bool) -> Response:
    return json_response({"object": "list", "url": url, "has_more": has_more, "data": data})


def _versioned(handler: Callable[..., Response]) -> Callable[..., Response]:
    """As Stripe: a request naming an API version that does not exist is refused."""

    @functools.wraps(handler)
    def checked(request: Request, **args: Any) -> Response:
        version = request.headers.get("Stripe-Version")
        if version is not None and not _released(version):
            message = f"Invalid Stripe API version: {version}"
            error = {"message": message, "type": "invalid_request_error"}
            return json_response({"error": error}, 400)
        return handler(request, **args)

    return checked


def _released(version: str) -> bool:
    date, _, name = version.partition(".")
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        return False
    return name in {"", "acacia", "basil", "clover", "dahlia", "endive"}


def _api_error() -> Response:
    return json_response(
        {"error": {"type": "api_error", "message": "An unknown error occurred on Stripe's side."}},
        500,
    )


def checkout_session_with_items(session_id: str, price_id: str) -> dict[str, Any]:
    """A checkout.session as retrieved with `expand[]=line_items`."""
    return {
        "id": session_id,
        "object": "checkout.session",
        "line_items": {
            "object": "list",
            "has_more": False,
            "url": f"/v1/checkout/sessions/{session_id}/line_items",
            "data": [
                {
                    "id": "li_1",
                    "object": "item",
                    "quantity": 1,
                    "price": {"id": price_id, "object": "price"},
                }
            ],
        },
    }
