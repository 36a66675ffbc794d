"""The one local Stripe: the slice of Stripe's API this service calls, for `make run`, `make demo`
and the tests, without an account. Nothing is charged.

It serves Stripe's objects whole (dev/stripe_shapes.py): checkout sessions (read back with their
line items), the customers and subscriptions a paid checkout makes (retrieved with their items,
updated to another quantity, prorated, cancelled at once), redaction jobs (a preview API), portal
sessions, the catalogue (products, prices and
Entitlements features, created, updated and paged as Stripe pages them) and the events it sent.
What a call asks to expand (`expand[]`, nested as `payment_intent.latest_charge`) comes whole, as
Stripe expands it: a paid subscription's first invoice (named by its checkout session) and a
one-time payment's intent and charge, each with the page its receipt link opens here. Where Stripe
refuses a combination of parameters this service could send, it refuses it the same way
(`invalid_request_error`, HTTP 400, naming the parameter), and it refuses an API version Stripe
never released. Each answer and event it makes is recorded for the suite (dev/stripe_record.py),
which holds them to Stripe's published types.

With `automatic_tax[enabled]` it calculates tax as Stripe Tax would for one buyer: every buyer
of the stand-in is in TAX_LOCATION, where a flat TAX_RATE_PERCENT applies to every product (a
simple, documented rate, not Stripe's tables). A price's `tax_behavior` decides whether the tax
is added on top (`exclusive`, and `unspecified`, as a Tax settings default of exclusive does)
or held in its amount (`inclusive`); the session's `amount_subtotal`, `total_details.amount_tax`
and `amount_total`, and each line item's, say so from its creation (Stripe says it once the
buyer's address is typed), and the paid session's `customer_details.address` is that place.

Its checkout page completes a session as Stripe would: the customer and (for a subscription) the
subscription are made, and the events Stripe sends then (`checkout.session.completed`, then
`customer.subscription.created`) are built from those objects, with the session's metadata
(user, team, price), quantity and mode, and delivered to the webhook signed as Stripe signs them;
its link back fills `{CHECKOUT_SESSION_ID}` in the success URL, as Stripe does. The page also
prints the same as `flask --app main events send` commands.

Given a state file (`make run`: `.data/stripe.json`), what it holds survives a restart: products
a founder created here are still sold at the next `make run` (`make reset` deletes the file).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import html
import itertools
import json
import logging
import os
import secrets
import shlex
import threading
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from core.stripe_objects import CURRENT_VERSION
from dev import loopback, stripe_record
from dev import stripe_shapes as shapes
from dev.samples import catalogue
from dev.samples.events import Facts
from dev.samples.send import Delivery, deliver
from dev.stripe_plan_changes import FEEDBACK, PlanChanges, public

API_KEY = "sk_test_local_stand_in"  # not a secret: the stand-in checks nothing
FLASK = "uv run flask --app main"
SESSION_TEMPLATE = "{CHECKOUT_SESSION_ID}"  # what Stripe fills in a success URL
PRORATIONS = ("always_invoice", "create_prorations", "none")
MOST_EVENTS = 1000  # kept for `GET /v1/events` (Stripe keeps 30 days)
# Where every buyer of the stand-in is, and the one tax rate there (see the docstring).
TAX_LOCATION = {"country": "DE", "postal_code": "10115", "city": "Berlin"}
TAX_RATE_PERCENT = 19
# A meter event's timestamp: within the past 35 calendar days, at most 5 minutes ahead; its
# identifier is unique within a rolling 24 hours (Stripe's "Create a billing meter event").
METER_EVENT_PAST = 35 * 86_400
METER_EVENT_AHEAD = 300
METER_IDENTIFIER_DAY = 86_400
# What the state file keeps, by id.
_HELD = (
    "sessions",
    "customers",
    "subscriptions",
    "invoices",
    "payment_intents",
    "charges",
    "products",
    "prices",
    "schedules",
    "coupons",
)
log = logging.getLogger(__name__)

_ROUTES = Map(
    [
        Rule("/v1/checkout/sessions", methods=["POST"], endpoint="create_session"),
        Rule("/v1/checkout/sessions", methods=["GET"], endpoint="list_sessions"),
        Rule("/v1/checkout/sessions/<sid>", methods=["GET"], endpoint="get_session"),
        Rule("/v1/checkout/sessions/<sid>/line_items", methods=["GET"], endpoint="line_items"),
        Rule("/v1/billing_portal/sessions", methods=["POST"], endpoint="create_portal"),
        Rule("/v1/customers/<cid>", methods=["GET"], endpoint="get_customer"),
        Rule("/v1/subscriptions/<sid>", methods=["GET"], endpoint="get_subscription"),
        Rule("/v1/subscriptions/<sid>", methods=["POST"], endpoint="update_subscription"),
        Rule("/v1/subscriptions/<sid>", methods=["DELETE"], endpoint="cancel_subscription"),
        Rule("/v1/privacy/redaction_jobs", methods=["POST"], endpoint="create_redaction_job"),
        Rule("/v1/privacy/redaction_jobs/<jid>", methods=["GET"], endpoint="get_redaction_job"),
        Rule(
            "/v1/privacy/redaction_jobs/<jid>/run", methods=["POST"], endpoint="run_redaction_job"
        ),
        Rule("/v1/events", methods=["GET"], endpoint="list_events"),
        Rule("/v1/events/<eid>", methods=["GET"], endpoint="get_event"),
        Rule("/v1/products", methods=["GET"], endpoint="list_products"),
        Rule("/v1/products", methods=["POST"], endpoint="create_product"),
        Rule("/v1/products/<pid>", methods=["GET"], endpoint="get_product"),
        Rule("/v1/products/<pid>", methods=["POST"], endpoint="update_product"),
        Rule("/v1/products/<pid>/features", methods=["GET"], endpoint="list_features"),
        Rule("/v1/prices", methods=["GET"], endpoint="list_prices"),
        Rule("/v1/prices", methods=["POST"], endpoint="create_price"),
        Rule("/v1/prices/<pid>", methods=["GET"], endpoint="get_price"),
        Rule("/v1/prices/<pid>", methods=["POST"], endpoint="update_price"),
        Rule("/v1/billing/meters", methods=["GET"], endpoint="list_meters"),
        Rule("/v1/billing/meters", methods=["POST"], endpoint="create_meter"),
        Rule("/v1/billing/meter_events", methods=["POST"], endpoint="create_meter_event"),
        Rule("/v1/invoices/create_preview", methods=["POST"], endpoint="create_preview"),
        Rule("/v1/invoices/<iid>", methods=["GET"], endpoint="get_invoice"),
        Rule("/v1/payment_intents", methods=["POST"], endpoint="create_payment_intent"),
        Rule("/v1/subscription_schedules", methods=["POST"], endpoint="create_schedule"),
        Rule("/v1/subscription_schedules/<schedule_id>", methods=["GET"], endpoint="get_schedule"),
        Rule(
            "/v1/subscription_schedules/<schedule_id>", methods=["POST"], endpoint="update_schedule"
        ),
        Rule(
            "/v1/subscription_schedules/<schedule_id>/release",
            methods=["POST"],
            endpoint="release_schedule",
        ),
        Rule("/v1/coupons/<coupon_id>", methods=["GET"], endpoint="get_coupon"),
        Rule("/v1/payment_intents/<pid>", methods=["GET"], endpoint="get_payment_intent"),
        Rule("/v1/charges/<cid>", methods=["GET"], endpoint="get_charge"),
        Rule("/v2/core/events/<eid>", methods=["GET"], endpoint="get_thin_event"),
        Rule("/invoice/<iid>", methods=["GET"], endpoint="invoice_page"),
        Rule("/receipt/<cid>", methods=["GET"], endpoint="receipt_page"),
        Rule("/pay/<sid>", methods=["GET"], endpoint="pay_page"),
        Rule("/pay/<sid>", methods=["POST"], endpoint="pay"),
        Rule("/portal/<pid>", methods=["GET"], endpoint="portal_page"),
        Rule("/portal/<pid>", methods=["POST"], endpoint="portal_change"),
        Rule("/period_end/<sid>", methods=["POST"], endpoint="period_end_page"),
    ]
)


class Refused(Exception):
    """A request Stripe would refuse: its HTTP status and error body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body["error"]["message"])
        self.status = status
        self.body = body


def _refused(message: str, *, param: str | None = None, status: int = 400) -> Refused:
    return Refused(status, shapes.error(message, param=param))


def _no_such(kind: str, found_id: str, *, param: str = "id") -> Refused:
    code = "resource_missing"
    return Refused(404, shapes.error(f"No such {kind}: '{found_id}'", param=param, code=code))


@dataclass
class Recorded:
    """A request the stand-in was sent (tests read what the service asked of Stripe)."""

    method: str
    path: str
    headers: dict[str, str]
    query: list[tuple[str, str]]
    body: bytes

    def form(self) -> dict[str, Any]:
        """The body decoded the way Stripe encodes parameters (`a[b][0][c]=v`)."""
        return decode_stripe_form(parse_qsl(self.body.decode(), keep_blank_values=True))

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Webhook:
    """Where the checkout page delivers the events a payment causes, and how it signs them."""

    url: str
    secret: str
    # A customer's e-mail as the service knows it, for a customer this stand-in never made (a
    # database kept from another Stripe).
    email_of: Callable[[str], str | None] = field(default=lambda customer: None)


class StripeStandIn(PlanChanges):
    """A WSGI app holding what Stripe would hold, by id; `state` names the file that keeps it
    across restarts; `demo` starts it with the demo catalogue (dev/samples/catalogue.py)."""

    def __init__(self, brand: str = "", *, state: Path | None = None, demo: bool = True) -> None:
        self.url = ""
        self.brand = brand
        self.demo = demo
        self.state = state
        self.lock = threading.RLock()
        self.requests: list[Recorded] = []
        self.sessions: dict[str, dict[str, Any]] = {}
        self.customers: dict[str, dict[str, Any]] = {}
        self.subscriptions: dict[str, dict[str, Any]] = {}
        # What a paid checkout leaves besides: a subscription's first invoice, a one-time
        # payment's intent and its charge (each with the page its receipt link opens).
        self.invoices: dict[str, dict[str, Any]] = {}
        self.payment_intents: dict[str, dict[str, Any]] = {}
        self.charges: dict[str, dict[str, Any]] = {}
        self.products: dict[str, dict[str, Any]] = {}
        self.prices: dict[str, dict[str, Any]] = {}
        self.features: dict[str, list[dict[str, Any]]] = {}
        self.meters: dict[str, dict[str, Any]] = {}
        # The meter events Stripe counts, by identifier (a second event with an identifier seen
        # within 24 hours is accepted and not counted again), and those naming no meter (Stripe
        # tells of them later with `v1.billing.meter.no_meter_found`).
        self.meter_events: dict[str, dict[str, Any]] = {}
        self.meter_events_without_meter: list[dict[str, Any]] = []
        # Thin events (`v2.core.event`) with their data, as `GET /v2/core/events/{id}` gives.
        self.thin_events: dict[str, dict[str, Any]] = {}
        # Newest first, as `GET /v1/events` lists them.
        self.events: list[dict[str, Any]] = []
        # Stripe misbehaving, for tests: refusing checkouts or portals, failing on its side
        # (every call answers 500 api_error), answering nothing while `responding` is clear.
        self.refuse_checkout = False
        self.refuse_portal = False
        self.outage = False
        # Failing on its side for the calls under these paths only (`/v1/privacy/`: one API).
        self.outage_paths: set[str] = set()
        # The refusal the next off-session charge meets whatever its card (`card_declined` or
        # `authentication_required`), as a test card would refuse it; cleared once used.
        self.next_off_session_refusal: str | None = None
        self._off_session: set[str] = set()  # the payment intents created off-session
        # Redaction jobs (a preview API) by id, and what a create with an idempotency key
        # answered, answered again to the same key as Stripe does.
        self.redaction_jobs: dict[str, dict[str, Any]] = {}
        self._idempotent: dict[str, dict[str, Any]] = {}
        # While set, Stripe is still validating every redaction job (as it may for a while);
        # while clear, the account is not in the redaction jobs preview.
        self.redaction_validating = False
        self.redaction_enrolled = True
        self.responding = threading.Event()
        self.responding.set()
        # Set once the API it serves is known (dev/stack.py); until then the page prints commands.
        self.webhook: Webhook | None = None
        # What a session keeps that Stripe shows only when asked (its line items), and the
        # subscription parameters its payment applies, by session id.
        self._extras: dict[str, dict[str, Any]] = {}
        # Customer portal sessions by id: whose they are and where they return.
        self.portals: dict[str, dict[str, Any]] = {}
        self._plan_changes_init()
        self.reset()
        self._load()

    def reset(self) -> None:
        """Back to a new account's state (the demo catalogue, if it has one), nothing recorded."""
        with self.lock:
            self.requests.clear()
            for held in (self.sessions, self.customers, self.subscriptions, self.products):
                held.clear()
            for held in (self.invoices, self.payment_intents, self.charges):
                held.clear()
            self.prices.clear()
            self.features.clear()
            self.meters.clear()
            self.meter_events.clear()
            self.meter_events_without_meter.clear()
            self.thin_events.clear()
            self.events.clear()
            self._extras.clear()
            self.portals.clear()
            self.redaction_jobs.clear()
            self._idempotent.clear()
            self.outage_paths.clear()
            self.redaction_validating = False
            self.redaction_enrolled = True
            self.next_off_session_refusal = None
            self._off_session.clear()
            self._plan_changes_reset()
            if self.demo:
                self.products.update({p["id"]: copy.deepcopy(p) for p in catalogue.PRODUCTS})
                self.prices.update({p["id"]: copy.deepcopy(p) for p in catalogue.PRICES})
                self.features.update(copy.deepcopy(catalogue.FEATURES))
            self.refuse_checkout = self.refuse_portal = self.outage = False
            self.responding.set()

    # What a test asks of it.

    def calls(self, method: str, path_prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    def checkout_params(self) -> list[dict[str, Any]]:
        """The decoded parameters of every checkout session created."""
        return [r.form() for r in self.calls("POST", "/v1/checkout/sessions")]

    def subscribe(
        self,
        subscription_id: str,
        *,
        customer: str = "cus_local",
        price: str = "price_local",
        quantity: int = 1,
        status: str = "active",
    ) -> dict[str, Any]:
        """A subscription held as if a checkout had made it (a test's Stripe-side state)."""
        found = self._price_or_stub(price, recurring=True)
        now = int(time.time())
        item = shapes.subscription_item(
            f"si_{subscription_id}", subscription_id, found, quantity, created=now
        )
        made = shapes.subscription(
            subscription_id, customer_id=customer, items=[item], created=now, status=status
        )
        with self.lock:
            self.subscriptions[subscription_id] = made
        return made

    def hold_session(self, found: dict[str, Any]) -> dict[str, Any]:
        """A checkout session a test describes (some of its fields; its line items, payment
        intent and invoice expanded or not), held whole as Stripe holds one: a new session's
        fields under the test's values, what it expands held as objects of their own (each
        answered whole where `expand[]` asks for it). Returns the session held."""
        partial = copy.deepcopy(found)
        sid = str(partial["id"])
        mode = str(partial.get("mode") or "payment")
        created = int(partial.get("created") or time.time())
        currency = str(partial.get("currency") or "usd")
        amount = int(partial.get("amount_total") or 0)
        session = shapes.checkout_session(
            sid, mode=mode, url=f"{self.url}/pay/{sid}", created=created, params={}
        )
        lines = []
        for n, line in enumerate((partial.pop("line_items", None) or {}).get("data") or []):
            price = line.get("price")
            price_id = str(price.get("id") if isinstance(price, dict) else price)
            whole_price = self._price_or_stub(price_id, recurring=mode == "subscription")
            made = shapes.line_item(
                str(line.get("id") or f"li_local_{n}"),
                whole_price,
                int(line.get("quantity") or 1),
                None,
            )
            lines.append(shapes.merged(made, line))
        details = partial.get("customer_details")
        if isinstance(details, dict):
            whole_details = shapes.customer_details(
                str(details.get("email") or ""), details.get("name")
            )
            partial["customer_details"] = shapes.merged(whole_details, details)
        intent = partial.get("payment_intent")
        if isinstance(intent, dict):
            charge = intent.get("latest_charge")
            if isinstance(charge, dict):
                whole_charge = shapes.charge(
                    str(charge["id"]),
                    amount=amount,
                    currency=currency,
                    customer_id=partial.get("customer"),
                    payment_intent=str(intent["id"]),
                    created=created,
                    receipt_url=None,
                )
                self.charges[str(charge["id"])] = shapes.merged(whole_charge, charge)
                charge = str(charge["id"])
            whole_intent = shapes.payment_intent(
                str(intent["id"]),
                amount=amount,
                currency=currency,
                customer_id=partial.get("customer"),
                latest_charge=charge,
                created=created,
            )
            self.payment_intents[str(intent["id"])] = shapes.merged(
                whole_intent, intent | {"latest_charge": charge}
            )
            partial["payment_intent"] = str(intent["id"])
        invoice = partial.get("invoice")
        if isinstance(invoice, dict):
            whole_invoice = shapes.invoice(
                str(invoice["id"]),
                customer_id=str(partial.get("customer") or "cus_local"),
                subscription_id=partial.get("subscription"),
                lines=[],
                created=created,
                currency=currency,
                paid=True,
            )
            self.invoices[str(invoice["id"])] = shapes.merged(whole_invoice, invoice)
            partial["invoice"] = str(invoice["id"])
        held: dict[str, Any] = shapes.merged(session, partial)
        with self.lock:
            self.sessions[sid] = held
            self._extras[sid] = {"line_items": lines, "subscription_data": {}}
        return held

    # The WSGI app.

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        body = request.get_data()
        self.requests.append(
            Recorded(
                request.method,
                request.path,
                dict(request.headers),
                list(request.args.items(multi=True)),
                body,
            )
        )
        try:
            endpoint, args = _ROUTES.bind_to_environ(environ).match()
            if request.path.startswith(("/v1/", "/v2/")):
                self._as_stripe(request)
            response = getattr(self, endpoint)(request, **args)
        except Refused as exc:
            response = _json(exc.body, exc.status)
        except HTTPException:
            response = _json(shapes.error(f"Unrecognized request URL ({request.path})"), 404)
        if response.mimetype == "application/json" and response.status_code == 200:
            stripe_record.record(
                "answer",
                json.loads(response.get_data()),
                what=f"{request.method} {request.path}",
                api_version=request.headers.get("Stripe-Version"),
            )
        return response(environ, start_response)

    def _as_stripe(self, request: Request) -> None:
        """What holds for every API call: an API version that exists, Stripe up and answering."""
        self.responding.wait(timeout=30)
        version = request.headers.get("Stripe-Version")
        if version is not None and not _released(version):
            raise _refused(f"Invalid Stripe API version: {version}")
        if self.outage or any(request.path.startswith(p) for p in self.outage_paths):
            message = "An unknown error occurred on Stripe's side."
            raise Refused(500, {"error": {"type": "api_error", "message": message}})

    # Checkout.

    def create_session(self, request: Request) -> Response:
        if self.refuse_checkout:
            raise _refused("No such price", param="line_items[0][price]")
        params = _params(request)
        mode = _checkout_mode(params)
        items = params.get("line_items") or []
        if not items:
            raise _refused(f"line_items is required in {mode} mode.", param="line_items")
        lines = [self._line_item(n, item, mode) for n, item in enumerate(items)]
        self._tax_rules(params, lines)
        # Random, as Stripe's are: a counter started again with each `make run`, and a kept
        # database then met the same checkout id twice (the second purchase not recorded).
        sid = f"cs_test_local_{secrets.token_hex(12)}"
        session = shapes.checkout_session(
            sid, mode=mode, url=f"{self.url}/pay/{sid}", created=int(time.time()), params=params
        )
        amount = sum(line["amount_total"] for line in lines)
        session |= {"amount_subtotal": amount, "amount_total": amount}
        session["currency"] = lines[0]["currency"]
        if _flag((params.get("automatic_tax") or {}).get("enabled")):
            session |= _taxed(lines)
        with self.lock:
            self.sessions[sid] = session
            self._extras[sid] = {
                "line_items": lines,
                "subscription_data": params.get("subscription_data") or {},
                "tax_ids": _flag((params.get("tax_id_collection") or {}).get("enabled")),
                "update_address": (params.get("customer_update") or {}).get("address") == "auto",
            }
            self._save()
        return _json(session)

    def _line_item(self, n: int, item: dict[str, Any], mode: str) -> dict[str, Any]:
        price_id = item.get("price")
        if not price_id:
            raise _refused(
                "You must specify either `price` or `price_data`.", param=f"line_items[{n}]"
            )
        found = self._price_or_stub(str(price_id), recurring=mode == "subscription")
        if not found.get("active", True):
            raise _refused(
                "The price specified is inactive. This field only accepts active prices.",
                param=f"line_items[{n}][price]",
            )
        recurring = found.get("recurring") is not None
        if mode == "payment" and recurring:
            raise _refused(
                "You specified `payment` mode but passed a recurring price. Either switch to"
                " `subscription` mode or use only one-time prices.",
                param="mode",
            )
        if mode == "subscription" and not recurring:
            raise _refused(
                "You must provide at least one recurring price in `subscription` mode when"
                " using prices.",
                param="line_items",
            )
        quantity = _int(item.get("quantity", 1), f"line_items[{n}][quantity]")
        adjustable = item.get("adjustable_quantity")
        if isinstance(adjustable, dict):
            adjustable = {
                "enabled": _flag(adjustable.get("enabled")),
                "maximum": _int(adjustable["maximum"], "maximum")
                if "maximum" in adjustable
                else None,
                "minimum": _int(adjustable["minimum"], "minimum")
                if "minimum" in adjustable
                else None,
            }
            low, high = adjustable["minimum"] or 0, adjustable["maximum"] or 999_999
            if not low <= quantity <= high:
                raise _refused(
                    "quantity must be between adjustable_quantity's minimum and maximum",
                    param=f"line_items[{n}][quantity]",
                )
        return shapes.line_item(f"li_local_{secrets.token_hex(8)}", found, quantity, adjustable)

    def _tax_rules(self, params: dict[str, Any], lines: list[dict[str, Any]]) -> None:
        """Stripe's rules for tax at Checkout, refused as Stripe refuses them.

        `customer_update` saves what the buyer types onto an existing customer, so it needs
        `customer`. Automatic tax needs a location: a new customer's billing address Checkout
        collects, an existing customer's saved address, or the one typed at Checkout when
        `customer_update[address]` (or `[shipping]`) is `auto`. Tax id collection for an
        existing customer needs `customer_update[name]=auto` (the tax id's business name is
        saved on it). With `managed_payments[enabled]` Stripe sets the parameters of tax
        configuration, shipping and Connect itself and refuses them, and every product sold
        needs a tax code eligible for Managed Payments (a stand-in holds any `txcd_` code
        eligible; Stripe's list is in its dashboard).
        """
        customer = params.get("customer")
        update = params.get("customer_update")
        if update is not None and not customer:
            raise _refused(
                "`customer_update` can only be used with `customer`.", param="customer_update"
            )
        update = update if isinstance(update, dict) else {}
        if _flag((params.get("managed_payments") or {}).get("enabled")):
            for param in _MANAGED_BY_STRIPE:
                if _nested(params, param) is not None:
                    raise _refused(
                        f"You can't specify `{param}` when `managed_payments[enabled]` is true:"
                        " Stripe manages it for Managed Payments sessions.",
                        param=param,
                    )
            for n, line in enumerate(lines):
                product = self.products.get(str(line["price"].get("product")))
                if product is not None and not str(product.get("tax_code") or "").startswith(
                    "txcd_"
                ):
                    raise _refused(
                        f"Managed Payments requires a tax code eligible for Managed Payments on"
                        f" every product; product {product['id']} has none.",
                        param=f"line_items[{n}][price]",
                    )
        if _flag((params.get("automatic_tax") or {}).get("enabled")) and customer:
            held = self.customers.get(str(customer)) or {}
            saved = (held.get("address") or {}).get("country")
            if not saved and "auto" not in (update.get("address"), update.get("shipping")):
                raise Refused(
                    400,
                    shapes.error(
                        "Automatic tax calculation in Checkout requires a valid address on the"
                        " Customer. Add a valid address to the Customer or set either"
                        " `customer_update[address]` to 'auto' or `customer_update[shipping]` to"
                        " 'auto' to save the address entered in Checkout to the Customer.",
                        code="customer_tax_location_invalid",
                    ),
                )
        collects_ids = _flag((params.get("tax_id_collection") or {}).get("enabled"))
        if collects_ids and customer and update.get("name") != "auto":
            raise _refused(
                "Tax ID collection requires updating business name on the customer. To enable"
                " tax ID collection for an existing customer, please set `customer_update[name]`"
                " to `auto`."
            )

    def _price_or_stub(self, price_id: str, *, recurring: bool) -> dict[str, Any]:
        """The price held, or, for one it never held (a test's price known to the database
        only), a price of no amount, one-time or monthly as the checkout's mode needs."""
        found = self.prices.get(price_id)
        if found is not None:
            return copy.deepcopy(found)
        stub = shapes.price(
            price_id, "prod_local_unknown", 0, "month" if recurring else None, created=0
        )
        return stub | {"unit_amount": None, "unit_amount_decimal": None}

    def get_session(self, request: Request, sid: str) -> Response:
        with self.lock:
            session = self.sessions.get(sid)
            if session is None:
                raise _no_such("checkout.session", sid, param="session")
            found = copy.deepcopy(session)
            lines = self._extras.get(sid, {}).get("line_items")
        expand = _expanded(request)
        if "line_items" in expand and lines is not None:
            found["line_items"] = shapes.listed(lines, f"/v1/checkout/sessions/{sid}/line_items")
        return _json(self._expand(found, expand - {"line_items"}))

    def _expand(self, found: dict[str, Any], paths: set[str]) -> dict[str, Any]:
        """`found` with the ids `expand[]` names replaced by the objects they name (a dotted
        path expands inside an expanded object, as `payment_intent.latest_charge`), as Stripe
        expands them; an id it holds no object for stays an id."""
        for path in sorted(paths):
            node: Any = found
            for part in path.split("."):
                if not isinstance(node, dict) or part not in node:
                    break
                if isinstance(node[part], str):
                    node[part] = copy.deepcopy(self._by_id(node[part])) or node[part]
                elif isinstance(node[part], list):  # a list of ids (`discounts`), each expanded
                    node[part] = [
                        copy.deepcopy(self._by_id(v)) or v if isinstance(v, str) else v
                        for v in node[part]
                    ]
                node = node[part]
        return found

    def _by_id(self, found_id: str) -> dict[str, Any] | None:
        """The object it holds of this id, whatever its type (ids carry their type's prefix)."""
        for held in (
            self.invoices,
            self.payment_intents,
            self.charges,
            self.customers,
            self.subscriptions,
            self.sessions,
            self.products,
            self.prices,
            self.schedules,
            self.discount_objects,
        ):
            if found_id in held:
                return held[found_id]
        return None

    def line_items(self, request: Request, sid: str) -> Response:
        if sid not in self.sessions:
            raise _no_such("checkout.session", sid, param="session")
        lines = self._extras.get(sid, {}).get("line_items") or []
        return _listed(request, lines, f"/v1/checkout/sessions/{sid}/line_items")

    def list_sessions(self, request: Request) -> Response:
        intent = request.args.get("payment_intent")
        subscription = request.args.get("subscription")
        found = [
            s
            for s in self.sessions.values()
            if (intent is None or s.get("payment_intent") == intent)
            and (subscription is None or s.get("subscription") == subscription)
        ]
        return _listed(request, list(reversed(found)), "/v1/checkout/sessions")

    def create_portal(self, request: Request) -> Response:
        if self.refuse_portal:
            raise _refused(
                "No configuration provided and your test mode default configuration has not"
                " been created. Provide a configuration or create your default by saving your"
                " customer portal settings in test mode."
            )
        params = _params(request)
        customer = params.get("customer")
        if not customer:
            raise _refused("Missing required param: customer.", param="customer")
        pid = f"bps_local_{secrets.token_hex(8)}"
        made = shapes.portal_session(
            pid,
            customer_id=str(customer),
            return_url=params.get("return_url"),
            url=f"{self.url}/portal/{pid}",
            created=int(time.time()),
        )
        with self.lock:
            self.portals[pid] = made
        return _json(made)

    def get_customer(self, request: Request, cid: str) -> Response:
        return self._held_answer(request, self.customers, "customer", cid)

    def get_invoice(self, request: Request, iid: str) -> Response:
        return self._held_answer(request, self.invoices, "invoice", iid)

    def save_card(self, customer_id: str, payment_method: str = "pm_card_visa") -> None:
        """The customer (made when unknown) with `payment_method` as its saved default
        (`invoice_settings.default_payment_method`), as a checkout that saves the card leaves
        it. Stripe's test payment methods decide how an off-session charge on it goes:
        `pm_card_chargeDeclined` is declined, `pm_card_authenticationRequired` needs the
        customer's authentication; any other succeeds."""
        with self.lock:
            found = self.customers.get(customer_id)
            if found is None:
                found = shapes.customer(
                    customer_id, email=None, name=None, created=int(time.time())
                )
                self.customers[customer_id] = found
            found["invoice_settings"]["default_payment_method"] = payment_method

    def off_session_charges(self) -> list[dict[str, Any]]:
        """The payment intents created off-session (each is a charge attempted once)."""
        with self.lock:
            return [copy.deepcopy(self.payment_intents[p]) for p in sorted(self._off_session)]

    def create_payment_intent(self, request: Request) -> Response:
        """A payment intent confirmed at once on a saved payment method (`confirm`), with the
        customer present or not (`off_session`), as Stripe answers it: paid
        (`payment_intent.succeeded`), or refused with a `card_error` (HTTP 402) naming the intent
        (`payment_intent.payment_failed`); a customer present with a card that needs
        authentication gets `requires_action`. The same idempotency key answers the first
        answer again, a refusal too, and charges nothing more."""
        key = request.headers.get("Idempotency-Key")
        params = _params(request)
        amount = _int(params.get("amount"), "amount") if "amount" in params else None
        if amount is None or amount < 1:
            raise _refused("Missing required param: amount.", param="amount")
        if not params.get("currency"):
            raise _refused("Missing required param: currency.", param="currency")
        confirm = _flag(params.get("confirm"))
        off_session = _flag(params.get("off_session"))
        if off_session and not confirm:
            raise _refused("off_session can only be used when confirm=true.", param="off_session")
        customer = str(params.get("customer") or "") or None
        method = str(params.get("payment_method") or "") or None
        if confirm and method is None:
            raise _refused(
                "You cannot confirm this PaymentIntent because it's missing a payment method.",
                param="payment_method",
            )
        with self.lock:
            if key and key in self._idempotent:
                kept = copy.deepcopy(self._idempotent[key])
                return _json(kept["body"], kept["status"])
            if customer is not None and customer not in self.customers:
                raise _no_such("customer", customer, param="customer")
            now = int(time.time())
            intent_id = f"pi_local_{secrets.token_hex(12)}"
            refusal = self.next_off_session_refusal if off_session else None
            if method == "pm_card_chargeDeclined":
                refusal = "card_declined"
            elif method == "pm_card_authenticationRequired" and off_session:
                refusal = "authentication_required"
            if off_session:
                self.next_off_session_refusal = None
            intent = shapes.payment_intent(
                intent_id,
                amount=amount,
                currency=str(params["currency"]).lower(),
                customer_id=customer,
                latest_charge=None,
                created=now,
            )
            intent |= {
                "metadata": dict(params.get("metadata") or {}),
                "description": params.get("description"),
                "payment_method": method,
                "amount_received": 0,
            }
            event_type: str | None = None
            status, body = 200, intent
            if refusal is not None:
                error = shapes.card_error(refusal, payment_method=method)
                intent |= {"status": "requires_payment_method", "last_payment_error": error}
                status, body = 402, {"error": {**error, "payment_intent": intent}}
                event_type = "payment_intent.payment_failed"
            elif method == "pm_card_authenticationRequired":
                intent |= {
                    "status": "requires_action",
                    "next_action": {"type": "use_stripe_sdk", "use_stripe_sdk": {}},
                }
            elif confirm:
                charge_id = f"ch_local_{secrets.token_hex(12)}"
                self.charges[charge_id] = shapes.charge(
                    charge_id,
                    amount=amount,
                    currency=intent["currency"],
                    customer_id=customer,
                    payment_intent=intent_id,
                    created=now,
                    receipt_url=f"{self.url}/receipt/{charge_id}",
                )
                intent |= {"latest_charge": charge_id, "amount_received": amount}
                event_type = "payment_intent.succeeded"
            else:
                intent |= {"status": "requires_confirmation"}
            self.payment_intents[intent_id] = intent
            if off_session:
                self._off_session.add(intent_id)
            if key:
                self._idempotent[key] = copy.deepcopy({"status": status, "body": body})
        if event_type is not None:
            self._send_later(event_type, copy.deepcopy(intent), None)
        return _json(copy.deepcopy(body), status)

    def get_payment_intent(self, request: Request, pid: str) -> Response:
        return self._held_answer(request, self.payment_intents, "payment_intent", pid)

    def get_charge(self, request: Request, cid: str) -> Response:
        return self._held_answer(request, self.charges, "charge", cid)

    def _held_answer(
        self, request: Request, held: dict[str, dict[str, Any]], kind: str, found_id: str
    ) -> Response:
        with self.lock:
            found = copy.deepcopy(held.get(found_id))
        if found is None:
            raise _no_such(kind, found_id)
        return _json(self._expand(found, _expanded(request)))

    def invoice_page(self, request: Request, iid: str) -> Response:
        """The page an invoice's `hosted_invoice_url` opens."""
        found = self.invoices.get(iid)
        if found is None:
            return _page(self.brand, "No such invoice", "", status=404)
        amount = f"{found['amount_paid'] / 100:.2f} {found['currency'].upper()}"
        return _page(self.brand, "Invoice", f"<p>Invoice {html.escape(iid)}: paid {amount}.</p>")

    def receipt_page(self, request: Request, cid: str) -> Response:
        """The page a charge's `receipt_url` opens."""
        found = self.charges.get(cid)
        if found is None:
            return _page(self.brand, "No such receipt", "", status=404)
        amount = f"{found['amount'] / 100:.2f} {found['currency'].upper()}"
        return _page(self.brand, "Receipt", f"<p>Receipt for {html.escape(cid)}: {amount}.</p>")

    # Subscriptions.

    def get_subscription(self, request: Request, sid: str) -> Response:
        with self.lock:
            found = self.subscriptions.get(sid)
            answer = public(found) if found is not None else None
        if answer is None:
            raise _no_such("subscription", sid)
        return _json(self._expand(answer, _expanded(request)))

    def update_subscription(self, request: Request, sid: str) -> Response:
        """Items' prices and quantities (`items[0][id]`, `items[0][price]`,
        `items[0][quantity]`), prorated as `proration_behavior` and `proration_date` say
        (dev/stripe_plan_changes.py), `payment_behavior`, `cancel_at_period_end` with
        `cancellation_details`, `discounts` and `metadata`; Stripe then sends
        `customer.subscription.updated` with what changed (and the invoice's events)."""
        params = _params(request)
        proration = params.get("proration_behavior")
        if proration is not None and proration not in PRORATIONS:
            raise _refused(
                f"Invalid proration_behavior: must be one of {', '.join(PRORATIONS)}",
                param="proration_behavior",
            )
        # A request sent again with its idempotency key answers the first one, as Stripe's do.
        key = request.headers.get("Idempotency-Key")
        with self.lock:
            if key and f"subscription:{key}" in self._idempotent:
                return _json(copy.deepcopy(self._idempotent[f"subscription:{key}"]))
            answer = self._update_subscription(sid, params)
            if key:
                self._idempotent[f"subscription:{key}"] = copy.deepcopy(answer)
        return _json(answer)

    def _update_subscription(self, sid: str, params: dict[str, Any]) -> dict[str, Any]:
        details = params.get("cancellation_details") or {}
        feedback = details.get("feedback")
        if feedback not in (None, "", *FEEDBACK):
            raise _refused(
                f"Invalid cancellation_details[feedback]: must be one of {', '.join(FEEDBACK)}",
                param="cancellation_details[feedback]",
            )
        with self.lock:
            found = self.subscriptions.get(sid)
            if found is None:
                raise _no_such("subscription", sid)
            if found["status"] in ("canceled", "incomplete_expired"):
                raise _refused(
                    "A canceled subscription can only update its cancellation_details and metadata."
                )
            if params.get("items") and found.get("schedule"):
                raise _refused(
                    "The subscription is managed by the subscription schedule"
                    f" `{found['schedule']}`, and updating any cancelation behavior or items"
                    " directly is not allowed. Please update the schedule instead.",
                )
            before = public(found)
            events, _ = self.change_items(found, params)
            watched = ("cancel_at_period_end", "discounts", "cancellation_details")
            previous = {k: copy.deepcopy(found.get(k)) for k in watched}
            if "cancel_at_period_end" in params:
                ending = _flag(params["cancel_at_period_end"])
                end = max(i["current_period_end"] for i in found["items"]["data"])
                found |= {
                    "cancel_at_period_end": ending,
                    "cancel_at": end if ending else None,
                    "canceled_at": int(time.time()) if ending else None,
                }
                found["cancellation_details"] = {
                    "comment": (details.get("comment") or None) if ending else None,
                    "feedback": (feedback or None) if ending else None,
                    "reason": "cancellation_requested" if ending else None,
                }
            elif details:
                found["cancellation_details"] |= {
                    k: details.get(k) or None for k in ("comment", "feedback") if k in details
                }
            if params.get("discounts"):
                self.apply_discounts(found, list(params["discounts"]))
            if "metadata" in params:
                found["metadata"] = {**found["metadata"], **params["metadata"]}
            changed = {k: v for k, v in previous.items() if found.get(k) != v}
            self._save()
            answer = public(found)
        if changed and not events:
            events = [("customer.subscription.updated", answer, changed)]
        elif changed:
            events[0] = (events[0][0], answer, {**(events[0][2] or {}), **changed})
        for event_type, obj, previous_attributes in events:
            self._send_later(event_type, obj, previous_attributes)
        del before
        return answer

    def _cancel_at_period_end(self, sid: str) -> None:
        """The portal's cancellation (its default mode): the subscription runs to its period's
        end, then ends; Stripe sends `customer.subscription.updated` now."""
        with self.lock:
            found = self.subscriptions[sid]
            items = found["items"]["data"]
            end = max((i["current_period_end"] for i in items), default=int(time.time()))
            previous = {
                "cancel_at": found.get("cancel_at"),
                "cancel_at_period_end": bool(found.get("cancel_at_period_end")),
                "canceled_at": found.get("canceled_at"),
                "cancellation_details": copy.deepcopy(found.get("cancellation_details")),
            }
            found |= {
                "cancel_at": end,
                "cancel_at_period_end": True,
                "canceled_at": int(time.time()),
                "cancellation_details": {
                    "comment": None,
                    "feedback": None,
                    "reason": "cancellation_requested",
                },
            }
            self._save()
            answer = copy.deepcopy(found)
        self._send_later("customer.subscription.updated", answer, previous)

    def cancel_subscription(self, request: Request, sid: str) -> Response:
        """`DELETE /v1/subscriptions/{id}`: cancelled at once (`status` canceled, `canceled_at`
        and `ended_at` now); Stripe then sends `customer.subscription.deleted`."""
        now = int(time.time())
        with self.lock:
            found = self.subscriptions.get(sid)
            if found is None:
                raise _no_such("subscription", sid)
            if found["status"] in ("canceled", "incomplete_expired"):
                raise _refused(
                    "A canceled subscription can only update its cancellation_details and metadata."
                )
            found |= {
                "status": "canceled",
                "canceled_at": now,
                "ended_at": now,
                "cancellation_details": {
                    "comment": None,
                    "feedback": None,
                    "reason": "cancellation_requested",
                },
            }
            self._save()
            answer = copy.deepcopy(found)
        # Stripe sends `previous_attributes` with `*.updated` events only.
        self._send_later("customer.subscription.deleted", answer, None)
        return _json(answer)

    # Redaction jobs (Privacy), a preview API: only under a preview API version. A job starts
    # validating; validation is instant here (the next retrieval finds it `ready`, unless
    # `redaction_validating` holds it); a run
    # redacts the customers' personal data (`[redacted]`) and the job then `succeeded`.

    def _preview_only(self, request: Request) -> None:
        preview = str(request.headers.get("Stripe-Version", "")).endswith(".preview")
        if not (preview and self.redaction_enrolled):
            raise _refused(
                "Redaction jobs are in preview: call them with a preview API version"
                " your account is enrolled in."
            )

    def create_redaction_job(self, request: Request) -> Response:
        self._preview_only(request)
        key = request.headers.get("Idempotency-Key")
        params = _params(request)
        customers = (params.get("objects") or {}).get("customers") or []
        if not customers:
            raise _refused("Missing required param: objects.", param="objects")
        behavior = params.get("validation_behavior") or "error"
        if behavior not in ("error", "fix"):
            raise _refused(
                "Invalid validation_behavior: must be one of error, fix",
                param="validation_behavior",
            )
        with self.lock:
            if key and key in self._idempotent:
                return _json(copy.deepcopy(self._idempotent[key]))
            job_id = f"prj_local_{secrets.token_hex(8)}"
            job: dict[str, Any] = {
                "id": job_id,
                "object": "privacy.redaction_job",
                "created": int(time.time()),
                "livemode": False,
                "objects": {"customers": list(customers)},
                "status": "validating",
                "validation_behavior": behavior,
            }
            self.redaction_jobs[job_id] = job
            if key:
                self._idempotent[key] = copy.deepcopy(job)
            return _json(copy.deepcopy(job))

    def get_redaction_job(self, request: Request, jid: str) -> Response:
        self._preview_only(request)
        with self.lock:
            job = self.redaction_jobs.get(jid)
            if job is None:
                raise _no_such("privacy.redaction_job", jid)
            if not (self.redaction_validating and job["status"] == "validating"):
                job["status"] = {"validating": "ready", "redacting": "succeeded"}.get(
                    job["status"], job["status"]
                )
            return _json(copy.deepcopy(job))

    def run_redaction_job(self, request: Request, jid: str) -> Response:
        self._preview_only(request)
        with self.lock:
            job = self.redaction_jobs.get(jid)
            if job is None:
                raise _no_such("privacy.redaction_job", jid)
            if job["status"] != "ready":
                raise _refused(f"A redaction job can only run in a ready status: {job['status']}")
            job["status"] = "redacting"
            for customer in job["objects"]["customers"]:
                if customer in self.customers:
                    self.customers[customer] |= {"email": "[redacted]", "name": "[redacted]"}
            return _json(copy.deepcopy(job))

    def list_events(self, request: Request) -> Response:
        """Newest first, `created[gte]` and `types[]` filters, cursor after `starting_after`."""
        gte = int(request.args.get("created[gte]", 0))
        # The SDK sends arrays indexed (`types[0]=...`), as Stripe's form encoding allows.
        types = {v for k, v in request.args.items(multi=True) if k.startswith("types[")} or None
        found = [
            e for e in self.events if e["created"] >= gte and (types is None or e["type"] in types)
        ]
        return _listed(request, found, "/v1/events")

    def get_event(self, request: Request, eid: str) -> Response:
        """An event it sent (the latest MOST_EVENTS), as `GET /v1/events/{id}` answers."""
        with self.lock:
            found = next((copy.deepcopy(e) for e in self.events if e["id"] == eid), None)
        if found is None:
            raise _no_such("event", eid)
        return _json(found)

    # The catalogue: listed and paged as Stripe lists it, so `products sync` (and a product or
    # price event) reads it as it reads Stripe's; created and updated (`active=false` archives)
    # with Stripe's parameters, for a founder to try a product of their own.

    def list_products(self, request: Request) -> Response:
        return _listed(request, list(self.products.values()), "/v1/products")

    def get_product(self, request: Request, pid: str) -> Response:
        if pid not in self.products:
            raise _no_such("product", pid)
        return _json(self.products[pid])

    def list_features(self, request: Request, pid: str) -> Response:
        found = self.features.get(pid, [])
        return _listed(request, found, f"/v1/products/{pid}/features")

    def create_product(self, request: Request) -> Response:
        params = _params(request)
        if not params.get("name"):
            raise _refused("Missing required param: name.", param="name")
        pid = str(params.get("id") or f"prod_local_{secrets.token_hex(6)}")
        with self.lock:
            if pid in self.products:
                raise _refused("Product already exists.", param="id")
            self.products[pid] = shapes.product(
                pid, str(params["name"]), None, {}, created=int(time.time())
            )
        return self.update_product(request, pid)

    def update_product(self, request: Request, pid: str) -> Response:
        params = _params(request)
        with self.lock:
            found = self.products.get(pid)
            if found is None:
                raise _no_such("product", pid)
            metadata = {**found["metadata"], **(params.get("metadata") or {})}
            # An empty value unsets a key, as Stripe's metadata does.
            found["metadata"] = {k: v for k, v in metadata.items() if v != ""}
            found.update({k: params[k] or None for k in ("description", "tax_code") if k in params})
            found.update({k: params[k] for k in ("name",) if params.get(k)})
            if "active" in params:
                found["active"] = _flag(params["active"])
            found["updated"] = int(time.time())
            self._save()
            return _json(copy.deepcopy(found))

    def create_price(self, request: Request) -> Response:
        params = _params(request)
        product_id = params.get("product")
        if product_id not in self.products:
            raise _no_such("product", str(product_id), param="product")
        if "unit_amount" not in params:
            raise _refused("Missing required param: unit_amount.", param="unit_amount")
        if not params.get("currency"):
            raise _refused("Missing required param: currency.", param="currency")
        pid = f"price_local_{secrets.token_hex(6)}"
        interval = (params.get("recurring") or {}).get("interval")
        found = shapes.price(
            pid,
            str(product_id),
            _int(params["unit_amount"], "unit_amount"),
            interval,
            created=int(time.time()),
            currency=str(params["currency"]),
            nickname=params.get("nickname"),
        )
        found["metadata"] = params.get("metadata") or {}
        behavior = params.get("tax_behavior", "unspecified")
        if behavior not in ("inclusive", "exclusive", "unspecified"):
            raise _refused(
                "Invalid tax_behavior: must be one of inclusive, exclusive, or unspecified",
                param="tax_behavior",
            )
        found["tax_behavior"] = behavior
        with self.lock:
            self.prices[pid] = found
            self._save()
        return _json(found)

    def get_price(self, request: Request, pid: str) -> Response:
        if pid not in self.prices:
            raise _no_such("price", pid)
        return _json(self.prices[pid])

    def update_price(self, request: Request, pid: str) -> Response:
        params = _params(request)
        with self.lock:
            found = self.prices.get(pid)
            if found is None:
                raise _no_such("price", pid)
            if "active" in params:
                found["active"] = _flag(params["active"])
            if "nickname" in params:
                found["nickname"] = params["nickname"] or None
            self._save()
            return _json(copy.deepcopy(found))

    def list_prices(self, request: Request) -> Response:
        product = request.args.get("product")
        found = [p for p in self.prices.values() if product in (None, p["product"])]
        return _listed(request, found, "/v1/prices")

    # The checkout page.

    # Billing meters.

    def meter_usage(self, event_name: str, customer_id: str) -> int:
        """What a meter sums for a customer: the values of the events it counted."""
        return sum(
            int(e["payload"]["value"])
            for e in self.meter_events.values()
            if e["event_name"] == event_name and e["payload"]["stripe_customer_id"] == customer_id
        )

    def create_meter(self, request: Request) -> Response:
        params = _params(request)
        for name in ("display_name", "event_name"):
            if not params.get(name):
                raise _refused(f"Missing required param: {name}.", param=name)
        formula = (params.get("default_aggregation") or {}).get("formula")
        if formula not in ("sum", "count", "last"):
            raise _refused(
                "Missing required param: default_aggregation[formula].",
                param="default_aggregation[formula]",
            )
        with self.lock:
            if any(m["event_name"] == params["event_name"] for m in self.meters.values()):
                raise _refused(
                    "An active meter with this event_name already exists.", param="event_name"
                )
            mid = f"mtr_local_{secrets.token_hex(8)}"
            self.meters[mid] = shapes.meter(
                mid,
                display_name=str(params["display_name"]),
                event_name=str(params["event_name"]),
                formula=formula,
                created=int(time.time()),
            )
            return _json(copy.deepcopy(self.meters[mid]))

    def list_meters(self, request: Request) -> Response:
        return _listed(request, list(self.meters.values()), "/v1/billing/meters")

    def create_meter_event(self, request: Request) -> Response:
        """Validated as Stripe validates a v1 meter event when it is sent (its parameters);
        whether a meter has its name is known later, as with Stripe."""
        params = _params(request)
        name = params.get("event_name")
        if not name:
            raise _refused("Missing required param: event_name.", param="event_name")
        payload = params.get("payload")
        if not isinstance(payload, dict) or not payload:
            raise _refused("Missing required param: payload.", param="payload")
        for key in ("stripe_customer_id", "value"):
            if not payload.get(key):
                raise _refused(f"Missing required param: payload[{key}].", param=f"payload[{key}]")
        if not str(payload["value"]).lstrip("-").isdigit():
            raise _refused("Invalid integer: payload[value].", param="payload[value]")
        now = int(time.time())
        timestamp = _int(params["timestamp"], "timestamp") if "timestamp" in params else now
        if not now - METER_EVENT_PAST <= timestamp <= now + METER_EVENT_AHEAD:
            raise _refused(
                "Timestamp must be within the past 35 calendar days or up to 5 minutes in the"
                " future.",
                param="timestamp",
            )
        identifier = str(params.get("identifier") or f"local_{secrets.token_hex(12)}")
        if len(identifier) > 100 or len(str(name)) > 100:
            raise _refused("Invalid string: identifier must be at most 100 characters.")
        found = shapes.meter_event(
            event_name=str(name),
            identifier=identifier,
            payload={k: str(v) for k, v in payload.items()},
            timestamp=timestamp,
            created=now,
        )
        with self.lock:
            seen = self.meter_events.get(identifier)
            if seen is not None and now - seen["created"] < METER_IDENTIFIER_DAY:
                return _json(found)  # accepted, not counted again
            if not any(m["event_name"] == name for m in self.meters.values()):
                self.meter_events_without_meter.append(found)
            else:
                self.meter_events[identifier] = found
        return _json(found)

    def get_thin_event(self, request: Request, eid: str) -> Response:
        found = self.thin_events.get(eid)
        if found is None:
            raise _no_such("event", eid)
        return _json(copy.deepcopy(found))

    def pay_page(self, request: Request, sid: str) -> Response:
        """The checkout: what is bought and by whom, a button that pays, the same as commands."""
        session = self._session(sid)
        facts = self.facts(sid, email=self._email(session))
        if session["status"] == "complete":
            return _page(self.brand, "Paid", "<p>This checkout is complete.</p>")
        rows = [
            ("Session", sid),
            ("Price", facts.price),
            ("Quantity", facts.quantity),
            ("Mode", facts.mode),
            ("Signed-in user", facts.user_id or "none: a guest checkout"),
            ("Team", facts.team_id or "none"),
            ("Customer", session.get("customer") or "new"),
        ]
        table = "".join(
            f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(str(v))}</code></td></tr>"
            for k, v in rows
        )
        email = html.escape(facts.email)
        if self.webhook is None:
            form = "<p>This stand-in has no webhook to send to: run the commands below.</p>"
        else:
            tax_id = (
                '<label>VAT number (optional) <input name="tax_id"></label> '
                if self._extras.get(sid, {}).get("tax_ids")
                else ""
            )
            form = (
                f'<form method="post" action="/pay/{html.escape(sid)}">'
                f'<label>Buyer\'s e-mail <input type="email" name="email" value="{email}"'
                f" required></label> {tax_id}"
                '<button type="submit">Pay (send the events Stripe would send)</button></form>'
                f"<p>Signed with the webhook secret, posted to"
                f" <code>{html.escape(self.webhook.url)}</code>.</p>"
            )
        shown = replace(facts, email=facts.email or "YOU@example.com")
        commands = "\n".join(html.escape(line) for line in send_commands(shown))
        body = (
            "<p>This is the local Stripe stand-in: nothing is paid here.</p>"
            f'<table id="session">{table}</table>{form}'
            "<p>Or send the same events from a terminal (after <code>source .data/run.env"
            f'</code>):</p><pre id="commands">{commands}</pre>'
        )
        return _page(self.brand, "Checkout", body)

    def pay(self, request: Request, sid: str) -> Response:
        """Pay: the session completes and its events reach the webhook, signed."""
        session = self._session(sid)
        email = (request.form.get("email") or self._email(session)).strip()
        if self.webhook is None or "@" not in email or session["status"] == "complete":
            reason = "no webhook" if self.webhook is None else "an e-mail address is needed"
            if session["status"] == "complete":
                reason = "this checkout is already complete"
            return _page(self.brand, "Not paid", f"<p>{html.escape(reason)}</p>", status=400)
        tax_id = (request.form.get("tax_id") or "").strip() or None
        events = self.complete(sid, email=email, tax_id=tax_id)
        try:
            deliveries = [self._deliver(event) for event in events]
        except OSError as exc:  # nothing listens there: `make run` is not serving that API
            said = f"The webhook at {self.webhook.url} did not answer: {exc}"
            return _page(self.brand, "Not paid", f"<p>{html.escape(said)}</p>", status=502)
        lines = "".join(
            f"<li><code>{html.escape(d.event_type)}</code> <code>{html.escape(d.event_id)}</code>"
            f" &rarr; {d.status} {html.escape(d.body)}</li>"
            for d in deliveries
        )
        back = return_link(session)
        link = (
            f'<p><a id="back" href="{html.escape(back)}">Back to the site</a></p>' if back else ""
        )
        status = 200 if all(d.ok for d in deliveries) else 502
        return _page(self.brand, "Paid", f'<ul id="deliveries">{lines}</ul>{link}', status=status)

    def complete(
        self, sid: str, *, email: str, name: str | None = None, tax_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The session paid by `email` (a business buyer gives `tax_id`, an EU VAT number,
        where the session collects tax ids): its customer (made unless it names one), its
        subscription (for one in subscription mode) or payment, then the events Stripe sends,
        recorded (`GET /v1/events`), one second apart (Stripe's `created` resolution)."""
        now = int(time.time())
        with self.lock:
            session = self._session(sid)
            extras = self._extras.get(sid, {})
            lines = extras.get("line_items") or []
            customer_id = session.get("customer")
            made = not customer_id
            if not customer_id:
                customer_id = f"cus_local_{secrets.token_hex(7)}"
                self.customers[customer_id] = shapes.customer(
                    customer_id, email=email, name=name, created=now
                )
            subscription = None
            details = shapes.customer_details(email, name)
            if session["automatic_tax"]["enabled"]:
                details["address"] |= TAX_LOCATION
                # The address typed is saved on a customer Checkout makes, and on an existing
                # one where `customer_update[address]` is `auto`: its next checkout is taxed.
                held = self.customers.get(str(customer_id))
                if held is not None and (made or extras.get("update_address")):
                    held["address"] = dict(details["address"])
            if tax_id and self._extras.get(sid, {}).get("tax_ids"):
                details["tax_ids"] = [{"type": "eu_vat", "value": tax_id}]
            session |= {
                "customer": customer_id,
                "customer_details": details,
                "status": "complete",
                "payment_status": "paid",
            }
            if session["mode"] == "subscription":
                subscription = self._subscription_of(session, lines, extras, created=now)
                session["subscription"] = subscription["id"]
                if subscription["status"] == "trialing":
                    session |= {"payment_status": "no_payment_required", "amount_total": 0}
                # Its first invoice, paid by this checkout (Stripe names it on the session).
                paid = self._first_invoice(session, subscription, email=email, created=now)
                session["invoice"] = subscription["latest_invoice"] = paid["id"]
            else:
                session["payment_intent"] = self._payment_of(session, created=now)["id"]
            types: list[tuple[str, dict[str, Any]]] = [("checkout.session.completed", session)]
            if subscription is not None:
                types.append(("customer.subscription.created", subscription))
            first = now - len(types) + 1
            events = [
                self._record(event_type, copy.deepcopy(obj), created=first + n)
                for n, (event_type, obj) in enumerate(types)
            ]
            self._save()
        return events

    def _first_invoice(
        self,
        session: dict[str, Any],
        subscription: dict[str, Any],
        *,
        email: str,
        created: int,
    ) -> dict[str, Any]:
        """The invoice a subscription's checkout pays: a line per item, for its first period
        (nothing due on a trial), tax as the session calculated it."""
        invoice_id = f"in_local_{secrets.token_hex(12)}"
        trialing = subscription["status"] == "trialing"
        lines = [
            shapes.invoice_line(
                f"il_local_{secrets.token_hex(8)}",
                invoice_id=invoice_id,
                subscription_id=subscription["id"],
                subscription_item=item["id"],
                price_id=item["price"]["id"],
                product_id=str(item["price"].get("product")),
                amount=0
                if trialing
                else (item["price"].get("unit_amount") or 0) * item["quantity"],
                currency=subscription["currency"],
                quantity=item["quantity"],
                start=item["current_period_start"],
                end=subscription["trial_end"] or item["current_period_end"],
            )
            for item in subscription["items"]["data"]
        ]
        tax = 0 if trialing else (session.get("total_details") or {}).get("amount_tax") or 0
        made = shapes.invoice(
            invoice_id,
            customer_id=subscription["customer"],
            subscription_id=subscription["id"],
            lines=lines,
            created=created,
            currency=subscription["currency"],
            paid=True,
            tax=tax,
        )
        number = f"{str(subscription['customer']).removeprefix('cus_')[-8:].upper()}-0001"
        made |= {
            "billing_reason": "subscription_create",
            "customer_email": email,
            "hosted_invoice_url": f"{self.url}/invoice/{invoice_id}",
            "number": number,
        }
        self.invoices[invoice_id] = made
        return made

    def _payment_of(self, session: dict[str, Any], *, created: int) -> dict[str, Any]:
        """The payment intent a one-time checkout succeeds with, and its charge."""
        intent_id = f"pi_local_{secrets.token_hex(12)}"
        charge_id = f"ch_local_{secrets.token_hex(12)}"
        amount = session.get("amount_total") or 0
        currency = session.get("currency") or "usd"
        self.charges[charge_id] = shapes.charge(
            charge_id,
            amount=amount,
            currency=currency,
            customer_id=session.get("customer"),
            payment_intent=intent_id,
            created=created,
            receipt_url=f"{self.url}/receipt/{charge_id}",
        )
        self.payment_intents[intent_id] = shapes.payment_intent(
            intent_id,
            amount=amount,
            currency=currency,
            customer_id=session.get("customer"),
            latest_charge=charge_id,
            created=created,
        )
        return self.payment_intents[intent_id]

    def _subscription_of(
        self,
        session: dict[str, Any],
        lines: list[dict[str, Any]],
        extras: dict[str, Any],
        *,
        created: int,
    ) -> dict[str, Any]:
        sub_id = f"sub_local_{secrets.token_hex(12)}"
        items = [
            shapes.subscription_item(
                f"si_local_{secrets.token_hex(7)}",
                sub_id,
                line["price"],
                line["quantity"],
                created=created,
            )
            for line in lines
        ]
        data = extras.get("subscription_data") or {}
        trial = data.get("trial_period_days")
        behavior = ((data.get("trial_settings") or {}).get("end_behavior") or {}).get(
            "missing_payment_method", "create_invoice"
        )
        made = shapes.subscription(
            sub_id,
            customer_id=str(session["customer"]),
            items=items,
            created=created,
            metadata=data.get("metadata") or {},
            trial_days=int(trial) if trial else None,
            trial_end_behavior=behavior,
        )
        self.subscriptions[sub_id] = made
        return made

    def _record(
        self,
        event_type: str,
        obj: dict[str, Any],
        *,
        created: int,
        previous: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        event = shapes.event(
            f"evt_local_{secrets.token_hex(12)}",
            event_type,
            obj,
            created=created,
            api_version=CURRENT_VERSION,
            previous=previous,
        )
        with self.lock:
            self.events.insert(0, event)
            del self.events[MOST_EVENTS:]
        stripe_record.record("event", event, what="the Stripe stand-in")
        return event

    def _deliver(self, event: dict[str, Any]) -> Delivery:
        assert self.webhook is not None
        return deliver(event, url=self.webhook.url, secret=self.webhook.secret)

    def _send_later(
        self,
        event_type: str,
        obj: dict[str, Any],
        previous: dict[str, Any] | None,
        *,
        created: int | None = None,
    ) -> None:
        """An event about a change made through the API, recorded, and delivered once the call
        that made it has been answered (Stripe's webhooks never come inside the call)."""
        when = int(time.time()) if created is None else created
        event = self._record(event_type, obj, created=when, previous=previous)
        self._save()
        if self.webhook is None:
            return

        def send() -> None:
            try:
                delivered = self._deliver(event)
            except OSError as exc:
                log.warning("%s not delivered to the webhook: %s", event_type, exc)
            else:
                log.info("%s delivered: %s", event_type, delivered.status)

        threading.Timer(0.05, send).start()

    def facts(self, sid: str, *, email: str) -> Facts:
        """Who buys what in a checkout session: its price, quantity, mode, customer, user and
        team, as the `events send` commands name them."""
        session = self._session(sid)
        metadata = session.get("metadata") or {}
        lines = self._extras.get(sid, {}).get("line_items") or []
        price = lines[0]["price"] if lines else {}
        recurring = price.get("recurring") or {}
        return Facts(
            email=email,
            customer=session.get("customer") or None,
            price=price.get("id") or metadata.get("price_id") or "",
            user_id=session.get("client_reference_id") or metadata.get("user_id") or None,
            session=session["id"],
            amount=session.get("amount_total") or 0,
            currency=session.get("currency") or "usd",
            mode=session.get("mode") or "payment",
            interval=recurring.get("interval") or "month",
            team_id=metadata.get("team_id") or None,
            quantity=lines[0]["quantity"] if lines else 1,
        )

    def _email(self, session: dict[str, Any]) -> str:
        """The buyer's e-mail as Stripe would know it: given to the session, or the customer's."""
        if session.get("customer_email"):
            return str(session["customer_email"])
        customer = session.get("customer")
        if customer in self.customers and self.customers[customer].get("email"):
            return str(self.customers[customer]["email"])
        if customer and self.webhook is not None:
            return self.webhook.email_of(str(customer)) or ""
        return ""

    def _session(self, sid: str) -> dict[str, Any]:
        session = self.sessions.get(sid)
        if session is None:
            raise _no_such("checkout.session", sid, param="session")
        return session

    def _portal(self, pid: str) -> dict[str, Any]:
        found = self.portals.get(pid)
        if found is None:
            raise _no_such("billing_portal.session", pid)
        return found

    def portal_page(self, request: Request, pid: str) -> Response:
        """The customer portal: the customer's subscriptions, each with its seats to change and
        a cancellation at the period's end, as Stripe's portal offers them; a link back."""
        portal = self._portal(pid)
        mine = [s for s in self.subscriptions.values() if s.get("customer") == portal["customer"]]
        rows = "".join(self._portal_row(pid, sub) for sub in mine) or (
            "<p>No subscriptions: purchases paid once are listed on the site.</p>"
        )
        back = portal.get("return_url")
        link = (
            f'<p><a id="back" href="{html.escape(back)}">Return to the site</a></p>' if back else ""
        )
        body = (
            "<p>This is the local Stripe stand-in's customer portal: a change here is made as"
            " in Stripe's and its events reach the webhook.</p>"
            f'<div id="subscriptions">{rows}</div>{link}'
        )
        return _page(self.brand, "Billing", body)

    def _portal_row(self, pid: str, sub: dict[str, Any]) -> str:
        item = sub["items"]["data"][0]
        product = self.products.get(str(item["price"].get("product")), {})
        name = html.escape(str(product.get("name") or item["price"]["id"]))
        quantity = int(item.get("quantity") or 1)
        end = datetime.fromtimestamp(item["current_period_end"], UTC)
        ends = end.strftime("%b %d, %Y")
        live = sub["status"] not in ("canceled", "incomplete_expired")
        if not live:
            state = f"{html.escape(sub['status'])}"
        elif sub.get("cancel_at_period_end"):
            state = f"cancelled: ends on {ends}"
        else:
            state = f"{html.escape(sub['status'])}, renews on {ends}"
        action = f"/portal/{html.escape(pid)}"
        sid = html.escape(sub["id"])
        forms = ""
        if live and not sub.get("cancel_at_period_end"):
            seats = (
                f'<form method="post" action="{action}">'
                f'<input type="hidden" name="subscription" value="{sid}">'
                f'<label>Quantity <input type="number" name="quantity" min="1" max="10000"'
                f' value="{quantity}" required></label>'
                '<button type="submit">Update quantity</button></form>'
            )
            cancel = (
                f'<form method="post" action="{action}">'
                f'<input type="hidden" name="subscription" value="{sid}">'
                '<input type="hidden" name="cancel" value="1">'
                '<button type="submit">Cancel subscription</button></form>'
            )
            forms = seats + cancel
        return (
            f'<section data-subscription="{sid}"><h2>{name}</h2>'
            f"<p>Quantity {quantity}; {state}.</p>{forms}</section>"
        )

    def portal_change(self, request: Request, pid: str) -> Response:
        """A change made in the portal: a new quantity, or a cancellation at the period's end."""
        portal = self._portal(pid)
        sid = str(request.form.get("subscription") or "")
        found = self.subscriptions.get(sid)
        if found is None or found.get("customer") != portal["customer"]:
            return _page(self.brand, "Not changed", "<p>No such subscription.</p>", status=404)
        if request.form.get("cancel"):
            self._cancel_at_period_end(sid)
        else:
            try:
                quantity = int(str(request.form.get("quantity")))
            except ValueError:
                quantity = 0
            if not 1 <= quantity <= 10000:
                said = "<p>The quantity is a whole number from 1 to 10000.</p>"
                return _page(self.brand, "Not changed", said, status=400)
            # The same change as through the API, with the prorations the portal makes.
            item = found["items"]["data"][0]["id"]
            form = urlencode(
                {
                    "items[0][id]": item,
                    "items[0][quantity]": quantity,
                    "proration_behavior": "create_prorations",
                }
            )
            self.update_subscription(Request.from_values(method="POST", data=form), sid)
        return redirect_to(f"/portal/{pid}")

    def period_end_page(self, request: Request, sid: str) -> Response:
        """Time passing, for a local walk: the subscription reaches its period's end (what
        `end_period` does), its events sent to the webhook."""
        if sid not in self.subscriptions:
            return _page(self.brand, "Not changed", "<p>No such subscription.</p>", status=404)
        self.end_period(sid)
        return _page(self.brand, "Period ended", f"<p>{html.escape(sid)} renewed.</p>")

    # The state file.

    def _load(self) -> None:
        if self.state is None or not self.state.exists():
            self._save()
            return
        held = json.loads(self.state.read_text())
        with self.lock:
            for name in _HELD:
                getattr(self, name).clear()
                getattr(self, name).update(held.get(name) or {})
            self.features.clear()
            self.features.update(held.get("features") or {})
            self.events[:] = held.get("events") or []
            self._extras.clear()
            self._extras.update(held.get("session_extras") or {})

    def _save(self) -> None:
        """Written whole, then moved over the old file: a stop half-way leaves the old one."""
        if self.state is None:
            return
        with self.lock:
            held = {name: getattr(self, name) for name in _HELD} | {
                "features": self.features,
                "events": self.events,
                "session_extras": self._extras,
            }
            self.state.parent.mkdir(parents=True, exist_ok=True)
            scratch = self.state.with_suffix(".json.tmp")
            scratch.write_text(json.dumps(held))
            os.replace(scratch, self.state)


def return_link(session: dict[str, Any]) -> str | None:
    """The success URL as Stripe redirects the buyer to it: the session's id filled in."""
    back = session.get("success_url")
    return str(back).replace(SESSION_TEMPLATE, str(session["id"])) if back else None


def events_for(facts: Facts) -> tuple[str, ...]:
    """The events a paid checkout causes that the service subscribes to, in a deliverable
    order: the checkout links the customer before its subscription's own event arrives."""
    if facts.mode == "subscription":
        return ("checkout.session.completed", "customer.subscription.created")
    return ("checkout.session.completed",)


def send_commands(facts: Facts) -> list[str]:
    """The `events send` commands that deliver the same events as the page's button."""
    who = ["--email", facts.email, "--price", facts.price]
    if facts.customer:
        who += ["--customer", facts.customer]
    if facts.team_id:
        who += ["--team", facts.team_id]
    if facts.quantity != 1:
        who += ["--quantity", str(facts.quantity)]
    lines = []
    for event_type in events_for(facts):
        args = [event_type, *who]
        if event_type.startswith("checkout."):
            args += ["--session", str(facts.session)]
            if facts.user_id:
                args += ["--user", facts.user_id]
        lines.append(f"{FLASK} events send {shlex.join(args)}")
    return lines


@contextlib.contextmanager
def running(brand: str = "", *, state: Path | None = None) -> Iterator[StripeStandIn]:
    """The stand-in on a free loopback port, for the duration of the block."""
    app = StripeStandIn(brand, state=state)
    with loopback.serving(app, name="stripe-stand-in") as app.url:
        yield app


def decode_stripe_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Rebuild nested params from `key[sub][0]=value` pairs, as Stripe's form encoding nests."""
    root: dict[str, Any] = {}
    for key, value in pairs:
        parts = key.replace("]", "").split("[")
        node: Any = root
        for part, nxt in itertools.pairwise(parts):
            child: Any = [] if nxt.isdigit() else {}
            if isinstance(node, list):
                index = int(part)
                while len(node) <= index:
                    node.append(child)
                node = node[index]
            else:
                node = node.setdefault(part, child)
        last = parts[-1]
        if isinstance(node, list):
            node.append(value)
        else:
            node[last] = value
    return root


def _params(request: Request) -> dict[str, Any]:
    return decode_stripe_form(parse_qsl(request.get_data(as_text=True), keep_blank_values=True))


def _checkout_mode(params: dict[str, Any]) -> str:
    """The session's mode, once the parameters fit it as Stripe requires."""
    mode = params.get("mode")
    if mode not in ("payment", "subscription", "setup"):
        raise _refused("Invalid mode: must be one of payment, setup, or subscription", param="mode")
    if params.get("customer") and params.get("customer_email"):
        raise _refused(
            "You may only specify one of these parameters: customer, customer_email.",
            param="customer_email",
        )
    if params.get("discounts") and _flag(params.get("allow_promotion_codes")):
        raise _refused(
            "You may only specify one of these parameters: allow_promotion_codes, discounts.",
            param="allow_promotion_codes",
        )
    only = {
        "subscription_data": "subscription",
        "customer_creation": "payment",
        "payment_intent_data": "payment",
        "invoice_creation": "payment",
    }
    for param, needs in only.items():
        if param in params and mode != needs:
            raise _refused(
                f"You can only pass `{param}` in `{needs}` mode.",
                param=param,
            )
    if params.get("customer") and "customer_creation" in params:
        raise _refused(
            "You may only specify one of these parameters: customer, customer_creation.",
            param="customer_creation",
        )
    trial = (params.get("subscription_data") or {}).get("trial_period_days")
    if trial is not None and not 1 <= _int(trial, "subscription_data[trial_period_days]") <= 730:
        raise _refused(
            "The trial period must be between 1 and 730 days.",
            param="subscription_data[trial_period_days]",
        )
    for param in ("success_url", "cancel_url"):
        url = params.get(param)
        if url is not None and not str(url).startswith(("http://", "https://")):
            raise _refused("Not a valid URL", param=param)
    return str(mode)


# What Stripe sets itself on a Managed Payments session and refuses when sent: tax configuration,
# shipping and Connect (Stripe's Managed Payments guide, "remove unsupported parameters"), and the
# payment method configuration.
_MANAGED_BY_STRIPE = (
    "automatic_tax",
    "tax_id_collection",
    "customer_update",
    "billing_address_collection",
    "shipping_address_collection",
    "shipping_options",
    "payment_method_configuration",
    "payment_intent_data[on_behalf_of]",
    "payment_intent_data[transfer_data]",
    "payment_intent_data[application_fee_amount]",
    "subscription_data[on_behalf_of]",
    "subscription_data[transfer_data]",
    "subscription_data[application_fee_percent]",
)


def _nested(params: dict[str, Any], name: str) -> Any:
    """The value of `a[b]` in decoded parameters; None when absent."""
    node: Any = params
    for part in name.replace("]", "").split("["):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _taxed(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The tax on these line items at TAX_RATE_PERCENT (each line item's own amounts set too),
    as the session's amounts and `automatic_tax` say it."""
    tax_total = 0
    for line in lines:
        subtotal = line["amount_subtotal"]
        if line["price"].get("tax_behavior") == "inclusive":
            tax = subtotal - round(subtotal * 100 / (100 + TAX_RATE_PERCENT))
            total = subtotal
        else:
            tax = round(subtotal * TAX_RATE_PERCENT / 100)
            total = subtotal + tax
        line |= {"amount_tax": tax, "amount_total": total}
        tax_total += tax
    return {
        "amount_subtotal": sum(line["amount_subtotal"] for line in lines),
        "amount_total": sum(line["amount_total"] for line in lines),
        "automatic_tax": {
            "enabled": True,
            "liability": {"type": "self"},
            "provider": "stripe",
            "status": "complete",
        },
        "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": tax_total},
    }


def _expanded(request: Request) -> set[str]:
    return {v for k, v in request.args.items(multi=True) if k.startswith("expand")}


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
    return _json(shapes.listed(found[:limit], url, has_more=len(found) > limit))


def _released(version: str) -> bool:
    """Whether Stripe knows `version`: one it has released (as the pinned stripe-python lists
    them), or a preview version on the date of a release."""
    date, _, name = version.partition(".")
    if name == "preview":
        return any(known.startswith(f"{date}") for known in released_versions())
    return version in released_versions()


@functools.cache
def released_versions() -> frozenset[str]:
    """The API versions Stripe has released, up to the one the pinned stripe-python is
    generated for: the values its webhook endpoint's `api_version` parameter takes."""
    from stripe.params._webhook_endpoint_create_params import WebhookEndpointCreateParams

    hint = WebhookEndpointCreateParams.__annotations__["api_version"]
    return frozenset(_literal_values(hint))


def _literal_values(hint: Any) -> set[str]:
    if typing.get_origin(hint) is typing.Literal:
        return {str(v) for v in typing.get_args(hint)}
    return set().union(*(_literal_values(arg) for arg in typing.get_args(hint)))


def _int(value: Any, param: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _refused(f"Invalid integer: {value}", param=param) from None


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _page(brand: str, title: str, body: str, *, status: int = 200) -> Response:
    heading = html.escape(f"{brand}: {title}" if brand else title)
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{heading} (Stripe stand-in)</title></head><body><h1>{heading}</h1>{body}"
        "</body></html>"
    )
    return Response(page, status=status, content_type="text/html; charset=utf-8")


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def redirect_to(path: str) -> Response:
    """After a form's POST, the page again (a reload then sends nothing twice)."""
    return Response(status=303, headers={"Location": path})
