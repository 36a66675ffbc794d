"""A local stand-in for the slice of Stripe's API this service calls, for `make run`/`make demo`
without an account: checkout and portal sessions (URLs that lead back here), a session read back
with its line items, a subscription's status.

It is not Stripe: nothing is charged. Its checkout page completes the session as Stripe would
report it: a button sends `checkout.session.completed` (and, for a subscription,
`customer.subscription.created`) with the session's price, mode, e-mail and user, signed as
Stripe signs with the webhook secret, to the local webhook; the page also prints the same as
`flask --app main events send` commands.
"""

from __future__ import annotations

import contextlib
import copy
import html
import json
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from dev.samples import catalogue
from dev.samples.events import Facts
from dev.samples.send import Delivery, send

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
        Rule("/pay/<sid>", methods=["POST"], endpoint="pay"),
        Rule("/portal", methods=["GET"], endpoint="portal_page"),
    ]
)


FLASK = "uv run flask --app main"


@dataclass
class Webhook:
    """Where the checkout page delivers the events a payment causes, and how it signs them."""

    url: str
    secret: str
    # The facts completed from the catalogue (the price's amount and mode), as Stripe knows them.
    priced: Callable[[Facts], Facts] = field(default=lambda facts: facts)
    # A known customer's e-mail, as Stripe keeps it on the customer (a signed-in buyer's
    # checkout names the customer, not the e-mail).
    email_of: Callable[[str], str | None] = field(default=lambda customer: None)


class StripeStandIn:
    """A WSGI app keeping the checkout sessions it created, by id."""

    def __init__(self, brand: str = "") -> None:
        self.url = ""
        self.brand = brand
        self.sessions: dict[str, dict[str, Any]] = {}
        # The catalogue, by id (a copy: a change made here stays with this run).
        self.products = {p["id"]: copy.deepcopy(p) for p in catalogue.PRODUCTS}
        self.prices = {p["id"]: copy.deepcopy(p) for p in catalogue.PRICES}
        self.features = copy.deepcopy(catalogue.FEATURES)
        # Set once the API it serves is known (dev/stack.py); until then the page prints commands.
        self.webhook: Webhook | None = None

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
            "success_url": form.get("success_url"),
            "cancel_url": form.get("cancel_url"),
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
        """The checkout: what is bought and by whom, a button that pays, the same as commands."""
        session = self._session(sid)
        facts = session_facts(session, email=self._email(session))
        if session["status"] == "complete":
            return _page(self.brand, "Paid", "<p>This checkout is complete.</p>")
        rows = [
            ("Session", sid),
            ("Price", facts.price),
            ("Mode", facts.mode),
            ("Signed-in user", facts.user_id or "none: a guest checkout"),
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
            form = (
                f'<form method="post" action="/pay/{html.escape(sid)}">'
                f'<label>Buyer\'s e-mail <input type="email" name="email" value="{email}"'
                " required></label> "
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
        try:
            deliveries = complete(session, email=email, webhook=self.webhook)
        except OSError as exc:  # nothing listens there: `make run` is not serving that API
            said = f"The webhook at {self.webhook.url} did not answer: {exc}"
            return _page(self.brand, "Not paid", f"<p>{html.escape(said)}</p>", status=502)
        if all(d.ok for d in deliveries):
            session |= {"status": "complete", "payment_status": "paid", "customer_email": email}
        lines = "".join(
            f"<li><code>{html.escape(d.event_type)}</code> <code>{html.escape(d.event_id)}</code>"
            f" &rarr; {d.status} {html.escape(d.body)}</li>"
            for d in deliveries
        )
        back = session.get("success_url")
        link = f'<p><a href="{html.escape(back)}">Back to the site</a></p>' if back else ""
        status = 200 if all(d.ok for d in deliveries) else 502
        return _page(self.brand, "Paid", f'<ul id="deliveries">{lines}</ul>{link}', status=status)

    def _email(self, session: dict[str, Any]) -> str:
        """The buyer's e-mail as Stripe would know it: given to the session, or the customer's."""
        if session.get("customer_email"):
            return str(session["customer_email"])
        if session.get("customer") and self.webhook is not None:
            return self.webhook.email_of(str(session["customer"])) or ""
        return ""

    def _session(self, sid: str) -> dict[str, Any]:
        session = self.sessions.get(sid)
        if session is None:
            raise NotFound()
        return session

    def portal_page(self, request: Request) -> Response:
        text = (
            "This is the local Stripe stand-in: there is no customer portal here.\n"
            "Send the events a change in the portal would cause instead, for example:\n"
            "  uv run flask --app main events send customer.subscription.deleted"
            " --email YOU@example.com\n"
        )
        return Response(text, content_type="text/plain; charset=utf-8")


def session_facts(session: dict[str, Any], *, email: str) -> Facts:
    """Who bought what in a checkout session: its price, mode, customer and user."""
    metadata = session.get("metadata") or {}
    return Facts(
        email=email,
        customer=session.get("customer") or None,
        price=session.get("line_items_price") or metadata.get("price_id") or "",
        user_id=session.get("client_reference_id") or metadata.get("user_id") or None,
        session=session["id"],
        mode=session.get("mode") or "payment",
    )


def events_for(facts: Facts) -> tuple[str, ...]:
    """The events a paid checkout causes that the service subscribes to, in a deliverable
    order: the checkout links the customer before its subscription's own event arrives."""
    if facts.mode == "subscription":
        return ("checkout.session.completed", "customer.subscription.created")
    return ("checkout.session.completed",)


def complete(session: dict[str, Any], *, email: str, webhook: Webhook) -> list[Delivery]:
    """Send the paid session's events, one second apart (Stripe's `created` resolution)."""
    facts = webhook.priced(session_facts(session, email=email))
    now = int(time.time())
    types = events_for(facts)
    first = now - len(types) + 1
    return [
        send(
            event_type=event_type,
            facts=facts,
            created=first + index,
            url=webhook.url,
            secret=webhook.secret,
        )
        for index, event_type in enumerate(types)
    ]


def send_commands(facts: Facts) -> list[str]:
    """The `events send` commands that deliver the same events as the page's button."""
    who = ["--email", facts.email, "--price", facts.price]
    if facts.customer:
        who += ["--customer", facts.customer]
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
def running(brand: str = "") -> Iterator[StripeStandIn]:
    """The stand-in on a free loopback port, for the duration of the block."""
    app = StripeStandIn(brand)
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
