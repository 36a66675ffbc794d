"""`make demo`: the whole loop on this machine, offline, each step printed; exits 0 when it held.

The stack starts as `make run` starts it (dev/stack.py; `EVENT_BUS=pubsub make demo` runs it on
the emulator), with every SaaS left out: the Stripe stand-in, the outbox instead of Resend,
local accounts instead of Supabase Auth. Then a new local user checks out the monthly demo
product through the API, and the events Stripe would send arrive signed at the webhook:
the checkout's completion (access granted, purchase e-mail), a renewal (invoice e-mail), a
cancellation (access revoked, cancellation e-mail). Then the same user buys 3 seats of it for a
team: the team's checkout and subscription arrive signed, two colleagues are invited by e-mail,
accept through the API and have access. With CHECKOUT_TAX=stripe_tax the checkout calculates tax
(the stand-in's rate) and the purchase and renewal mails show it. Last, credits: a pack of
generations is bought and consumed through POST /api/usage until it answers 402, and a plan
billed on a meter is consumed past its credits, the overage reported to the stand-in's meter.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from email import policy
from email.parser import BytesHeaderParser, BytesParser
from functools import partial
from typing import Any, TypeVar

from access.announcements import announced_ids
from adapters.mail.outbox import OutboxMailer
from catalogue import service as catalogue
from config import Settings
from core.money import format_amount
from dev import local_users
from dev import stack as local_stack
from dev.samples import send as sample_events
from dev.samples.catalogue import TAX_CODE
from dev.samples.events import DEFAULT_PRICE, Facts
from runtime import logs
from runtime.container import Container

# Seconds a step may take before the demo gives up: only a hang guard. A step takes well under
# a second on an idle machine (Pub/Sub retries after 1 s) but many times that on a loaded one,
# where the suite runs the demo too.
WAIT = 120.0
OFFLINE = {
    "app_env": "development",
    "supabase_url": None,
    "supabase_publishable_key": None,
    "supabase_secret_key": None,
    "supabase_jwt_secret": None,
    "stripe_secret_key": None,
    "stripe_api_base": None,
    "resend_api_key": None,
    "github_token": None,
    # POST /api/usage, which the credits' part of the demo calls (a local, published value).
    "usage_api_key": "demo-usage-key-not-a-secret-0123456789",
}
# (event type, what it stands for, has_access afterwards, the e-mail it calls for)
STEPS = (
    ("checkout.session.completed", "the checkout is paid", True, "purchase-confirmation"),
    ("invoice.paid", "a month later, the renewal", True, "invoice-paid"),
    ("customer.subscription.deleted", "the cancellation", False, "subscription-cancelled"),
)
T = TypeVar("T")


class DemoFailed(RuntimeError):
    """A step did not happen in time."""


def main() -> int:
    """Run the demo; 0 when every step held."""
    started = time.monotonic()
    # The steps below tell the story; request and SDK lines would bury it.
    logs.configure(json_output=False, level="WARNING")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    settings = local_stack.with_overrides(Settings(), OFFLINE)
    try:
        with contextlib.ExitStack() as stack:
            container = local_stack.start(settings, stack)
            server = local_stack.api_server(container, host="127.0.0.1", port=0)
            url = local_stack.serve_in_background(server, stack)
            print(f"API on {url}; e-mails go to {container.settings.email_outbox_dir.resolve()}")
            email = run(container, url)
            run_team(container, url, email)
            run_credits(container, url)
    except DemoFailed as exc:
        print(f"\nDEMO FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"\nDemo passed in {time.monotonic() - started:.1f} s: 3 signed events, access granted")
    print("then revoked, 3 e-mails; a team bought 3 seats and 2 invited members got access;")
    print("a pack of credits consumed to 402, a metered plan's overage reported to its meter.")
    print("With `make run` going, after `source .data/run.env`:")
    print(f"  uv run flask --app main users show {email}")
    print(
        f"The same in a browser: `make run`, then open http://localhost:{settings.port}/"
        " (web/'s pages)."
    )
    return 0


def run(container: Container, url: str) -> str:
    """The loop against a started stack; returns the demo user's e-mail."""
    c, settings = container, container.settings
    email = f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}@example.com"
    profile, _ = local_users.create(email=email, name="Demo Buyer", db=c.db, settings=settings)
    print(f"\n[1/5] user created        {email} (id {profile.id})")
    token = local_users.token(email=email, ttl=600, db=c.db, settings=settings)
    session = checkout(url, token)
    print(f"[2/5] checkout created    {session} for {DEFAULT_PRICE} (Bearer token of the user)")
    facts = taxed(c, Facts(email=email, user_id=profile.id, session=session))
    # One second apart (Stripe's `created` has one-second resolution), the last one now.
    first = int(time.time()) - len(STEPS) + 1
    for index, step in enumerate(STEPS):
        send_and_watch(c, url, facts, step, number=index + 3, created=first + index)
        if index == 0:
            check_purchase(c, session, str(profile.id))
    return email


def run_team(c: Container, url: str, owner_email: str) -> None:
    """The owner buys 3 seats for a team; two colleagues accept their invitations and have
    access through the team's subscription."""
    settings = c.settings
    token = local_users.token(email=owner_email, ttl=600, db=c.db, settings=settings)
    team = call(url, "POST", "/api/teams", token, {"name": "Demo Team"})
    print(f"\n[team 1/4] team created   {team['name']} (id {team['id']}), owner {owner_email}")
    body = {
        "priceId": DEFAULT_PRICE,
        "mode": "subscription",
        "successUrl": url + "/?checkout=success",
        "cancelUrl": url + "/?checkout=cancelled",
        "teamId": team["id"],
        "quantity": 3,
    }
    session = str(call(url, "POST", "/api/payments/create-checkout", token, body)["url"])
    session = session.rsplit("/", 1)[-1]
    owner = local_users.create(email=owner_email, name=None, db=c.db, settings=settings)[0]
    facts = Facts(
        email=owner_email, user_id=owner.id, session=session, team_id=team["id"], quantity=3
    )
    now = int(time.time())
    for offset, event_type in enumerate(
        ("checkout.session.completed", "customer.subscription.created")
    ):
        delivery = sample_events.send(
            event_type=event_type,
            facts=facts,
            created=now + offset,
            url=url + "/api/webhook/payments",
            secret=settings.webhook_secret,
        )
        if not delivery.ok:
            raise DemoFailed(f"the webhook refused {event_type}: {delivery.status}")
        wait(partial(applied, c, delivery.event_id, str(owner.id)), f"access {event_type}")
        if event_type == "checkout.session.completed":
            kind = "purchase-confirmation"
            key = f"{delivery.event_id}/{kind}"
            path, subject = wait(partial(sent, c, key, session=session), f"the {kind}")
            confirmation = f"      e-mail      {kind}: {subject!r}\n                  {path}"
    seats = wait(lambda: call(url, "GET", f"/api/teams/{team['id']}", token)["seats"], "seats")
    print(f"[team 2/4] 3 seats bought {session}: seats {seats['total']}, used {seats['used']}")
    print(confirmation)
    stamp = owner_email.removeprefix("demo-").split("@")[0]
    for number, name in enumerate(("grace", "alan"), start=3):
        email = f"{name}-{stamp}@example.com"
        local_users.create(email=email, name=name.title(), db=c.db, settings=settings)
        invited = call(url, "POST", f"/api/teams/{team['id']}/invitations", token,
                       {"email": email, "role": "member"})  # fmt: skip
        link, mail = wait(partial(invitation_link, c, email), f"the invitation e-mail to {email}")
        their_token = local_users.token(email=email, ttl=600, db=c.db, settings=settings)
        accepted = call(url, "POST", "/api/invitations/accept", their_token,
                        {"token": link.rsplit("token=", 1)[-1]})  # fmt: skip
        access = call(url, "GET", "/api/me", their_token)["hasAccess"]
        print(f"[team {number}/4] {email} invited ({invited['role']}), accepted"
              f" ({accepted['role']}): has_access {str(access).lower()}")  # fmt: skip
        print(f"      e-mail      team-invitation\n                  {mail}")
        if access is not True:
            raise DemoFailed(f"{email} has no access through the team")


PACK_CREDITS, PLAN_CREDITS, METER = 5, 3, "demo_generations_overage"


def run_credits(c: Container, url: str) -> None:
    """A pack bought and consumed to 402; a plan on a meter consumed past its credits, the
    overage reported once per key to the stand-in's meter."""
    client = c.stripe.client
    mailer = c.mailer
    before = set(mailer.messages()) if isinstance(mailer, OutboxMailer) else set()
    if not any(m.event_name == METER for m in client.v1.billing.meters.list().auto_paging_iter()):
        client.v1.billing.meters.create(
            params={
                "display_name": "Demo generations",
                "event_name": METER,
                "default_aggregation": {"formula": "sum"},
            }
        )
    pack = _product(
        c,
        "Demo Pack",
        {"credits": f"generations:{PACK_CREDITS}", "credits_period": "once"},
        recurring=False,
    )
    plan = _product(
        c,
        "Demo Metered",
        {"credits": f"generations:{PLAN_CREDITS}", "meter": METER},
        recurring=True,
    )
    # Synced as the service syncs under this setting: a product it could not sell is left out.
    catalogue.sync(c.db, c.stripe, needs_tax_code=c.settings.products_need_tax_code)
    stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S}"
    for name, price, mode in (("pack", pack, "payment"), ("plan", plan, "subscription")):
        email = f"credits-{name}-{stamp}@example.com"
        profile, _ = local_users.create(
            email=email, name=name.title(), db=c.db, settings=c.settings
        )
        token = local_users.token(email=email, ttl=600, db=c.db, settings=c.settings)
        body = {"priceId": price, "mode": mode, "successUrl": url + "/?checkout=success",
                "cancelUrl": url + "/?checkout=cancelled"}  # fmt: skip
        session = str(call(url, "POST", "/api/payments/create-checkout", token, body)["url"])
        facts = Facts(
            email=email,
            user_id=str(profile.id),
            session=session.rsplit("/", 1)[-1],
            price=price,
            mode=mode,
            amount=900,
        )
        events = ["checkout.session.completed"]
        events += ["customer.subscription.created", "invoice.paid"] if mode != "payment" else []
        now = int(time.time())
        for offset, event_type in enumerate(events):
            delivery = sample_events.send(
                event_type=event_type,
                facts=facts,
                created=now - len(events) + offset,
                url=url + "/api/webhook/payments",
                secret=c.settings.webhook_secret,
            )
            if not delivery.ok:
                raise DemoFailed(f"the webhook refused {event_type}: {delivery.status}")
            wait(partial(applied, c, delivery.event_id, str(profile.id)), f"access {event_type}")
        granted = PACK_CREDITS if name == "pack" else PLAN_CREDITS
        wait(partial(_balance, c, str(profile.id), granted), f"{granted} credits of the {name}")
        answers = [_use(c, url, str(profile.id), f"demo-{name}-{stamp}-{n}") for n in range(6)]
        said = ", ".join(str(status) for status, _ in answers)
        print(f"\n[credits] {name}: {granted} generations granted; 6 consumptions answered {said}")
        print(f"      last answer {answers[-1][1]}")
        if name == "pack" and [s for s, _ in answers] != [200] * PACK_CREDITS + [402]:
            raise DemoFailed(f"the pack's consumptions answered {said}")
        if name == "plan":
            over = 6 - PLAN_CREDITS
            reported = wait(partial(_reported, c, str(profile.id), over), "the overage's report")
            print(f"      overage     {over} generations reported to meter {METER}: {reported}")
    # Each purchase's confirmation, the plan's receipt, each balance's credits-low warning.
    mails = wait(partial(_new_mails, c, before, 5), "the credits' e-mails")
    for path, subject in mails:
        print(f"      e-mail      {subject!r}\n                  {path}")


def _new_mails(c: Container, before: set[Any], count: int) -> list[tuple[str, str]] | None:
    mailer = c.mailer
    if not isinstance(mailer, OutboxMailer):
        return []
    new = [p for p in mailer.messages() if p not in before]
    if len(new) < count:
        return None
    found = []
    for path in new:
        with path.open("rb") as file:
            found.append(
                (str(path), str(BytesHeaderParser(policy=policy.default).parse(file)["Subject"]))
            )
    return found


def _product(c: Container, name: str, metadata: dict[str, str], *, recurring: bool) -> str:
    """A product and its price at the stand-in, as a founder makes them in the Dashboard: with
    the demo catalogue's tax code, which every CHECKOUT_TAX setting can sell (Managed Payments
    refuses a product without an eligible one)."""
    client = c.stripe.client
    product = client.v1.products.create(
        params={"name": name, "metadata": {"type": "link", **metadata}, "tax_code": TAX_CODE}
    )
    if recurring:
        price = client.v1.prices.create(
            params={
                "product": product.id,
                "unit_amount": 900,
                "currency": "usd",
                "recurring": {"interval": "month"},
            }
        )
    else:
        price = client.v1.prices.create(
            params={"product": product.id, "unit_amount": 900, "currency": "usd"}
        )
    return str(price.id)


def _use(c: Container, url: str, user_id: str, key: str) -> tuple[int, Any]:
    """POST /api/usage as the founder's other services call it: one generation under `key`."""
    secret = c.settings.usage_api_key
    request = urllib.request.Request(  # noqa: S310 - our own loopback server
        url + "/api/usage",
        data=json.dumps(
            {"userId": user_id, "feature": "generations", "amount": 1, "key": key}
        ).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {secret.get_secret_value() if secret else ''}",
        },
    )
    try:
        with sample_events.DIRECT.open(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _balance(c: Container, user_id: str, granted: int) -> bool | None:
    rows = c.db.fetch_all(
        "select b.balance from public.credit_balance(public.credit_account(%s::uuid,"
        " 'generations'), 'generations') b",
        (user_id,),
    )
    return True if rows and rows[0]["balance"] == granted else None


def _reported(c: Container, user_id: str, over: int) -> str | None:
    """The overage's keys once each was reported to the meter."""
    rows = c.db.fetch_all(
        "select u.key from public.credit_uses u join public.accounts a on a.id = u.account_id"
        " where a.owner_id = %s::uuid and u.overage > 0 and u.reported_at is not null"
        " order by u.key",
        (user_id,),
    )
    return ", ".join(r["key"] for r in rows) if len(rows) == over else None


def call(url: str, method: str, path: str, token: str, body: Any = None) -> Any:
    """One API call as a signed-in user; the JSON it answers."""
    request = urllib.request.Request(  # noqa: S310 - our own loopback server
        url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with sample_events.DIRECT.open(request, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        raise DemoFailed(f"{method} {path} answered {exc.code}: {exc.read()[:300]!r}") from exc


def invitation_link(c: Container, email: str) -> tuple[str, str] | None:
    """The accept link of the invitation mailed to `email` and its .eml, once it is in the
    outbox."""
    mailer = c.mailer
    if not isinstance(mailer, OutboxMailer):
        return None
    for path in reversed(mailer.messages()):
        with path.open("rb") as file:
            message = BytesParser(policy=policy.default).parse(file)
        text = message.get_body(preferencelist=("plain",))
        if message["To"] == email and text is not None:
            found = re.search(r"\S+/invitations/accept\?token=[\w-]+", str(text.get_content()))
            if found:
                return found.group(0), str(path)
    return None


def check_purchase(c: Container, session: str, user_id: str) -> None:
    """The paid checkout is one purchase of the user's, under its own session id."""
    rows = c.db.fetch_all(
        "select user_id::text as user_id, paid, amount_total, currency from public.purchases"
        " where stripe_checkout_session_id = %s",
        (session,),
    )
    if len(rows) != 1 or rows[0]["user_id"] != user_id or rows[0]["paid"] is not True:
        raise DemoFailed(f"the purchase of {session} is not recorded as paid: {rows}")
    print(f"      purchase    {session} paid, {rows[0]['amount_total']} {rows[0]['currency']}")


def check_entitlement(c: Container, subscription_id: str, user_id: str, *, active: bool) -> None:
    """The subscription is one entitlement of the user's, active as access says."""
    rows = c.db.fetch_all(
        "select a.owner_id::text as user_id, e.kind, e.status, e.active"
        " from public.entitlements e join public.accounts a on a.id = e.account_id"
        " where e.source_id = %s",
        (subscription_id,),
    )
    if len(rows) != 1 or rows[0]["user_id"] != user_id or rows[0]["active"] is not active:
        raise DemoFailed(f"the entitlement of {subscription_id} is not active={active}: {rows}")
    print(f"      entitlement {subscription_id} {rows[0]['status']}")


def send_and_watch(
    c: Container,
    url: str,
    facts: Facts,
    step: tuple[str, str, bool, str],
    *,
    number: int,
    created: int,
) -> None:
    """One signed event to the webhook; wait for its access change and its e-mail."""
    event_type, meaning, access, kind = step
    delivery = sample_events.send(
        event_type=event_type,
        facts=facts,
        created=created,
        url=url + "/api/webhook/payments",
        secret=c.settings.webhook_secret,
    )
    print(f"[{number}/5] {meaning}: {event_type}")
    print(f"      event       {delivery.event_id}")
    print(f"      webhook     {delivery.status} {delivery.body}")
    if not delivery.ok:
        raise DemoFailed(f"the webhook refused {event_type}: {delivery.status}")
    user_id = str(facts.user_id)
    has_access = wait(lambda: applied(c, delivery.event_id, user_id), f"access {event_type}")
    print(f"      has_access  {str(has_access).lower()}")
    if has_access is not access:
        raise DemoFailed(f"has_access is {has_access} after {event_type}, not {access}")
    check_entitlement(c, facts.subscription_id, user_id, active=access)
    path, subject = wait(
        lambda: sent(c, f"{delivery.event_id}/{kind}", session=facts.session), f"the {kind} e-mail"
    )
    print(f"      e-mail      {kind}: {subject!r}\n                  {path}")


def checkout(url: str, token: str) -> str:
    """POST /api/payments/create-checkout as the user; the session id from the URL it answers."""
    body = {
        "priceId": DEFAULT_PRICE,
        "mode": "subscription",
        "successUrl": url + "/?checkout=success",
        "cancelUrl": url + "/?checkout=cancelled",
    }
    request = urllib.request.Request(  # noqa: S310 - our own loopback server
        url + "/api/payments/create-checkout",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with sample_events.DIRECT.open(request, timeout=10) as response:
        answer: dict[str, Any] = json.load(response)
    if not answer.get("url"):
        raise DemoFailed(f"create-checkout answered {answer}")
    return str(answer["url"]).rsplit("/", 1)[-1]


def taxed(c: Container, facts: Facts) -> Facts:
    """Under CHECKOUT_TAX=stripe_tax, the facts with the amount and the tax the session's
    Stripe calculated (the stand-in's rate), for the events that follow it."""
    session = str(facts.session)
    if c.settings.checkout_tax != "stripe_tax":
        return facts
    found = c.stripe.checkout_session(session) or {}
    tax = (found.get("total_details") or {}).get("amount_tax")
    subtotal, currency = found.get("amount_subtotal"), str(found.get("currency") or "usd")
    if not isinstance(tax, int) or not isinstance(subtotal, int):
        raise DemoFailed(f"the session {session} says no tax: {found.get('automatic_tax')}")
    print(
        f"      tax         {format_amount(tax, currency)} on {format_amount(subtotal, currency)}"
        " (Stripe Tax, as the stand-in calculates it)"
    )
    return replace(facts, amount=subtotal, tax=tax)


def applied(c: Container, event_id: str, user_id: str) -> bool | None:
    """`has_access` once the access subscriber has recorded `event_id`, else None."""
    rows = c.db.fetch_all(
        "select p.has_access from public.processed_events e, public.profiles p"
        " where e.consumer = 'access' and e.event_id = %s and e.outcome <> 'pending'"
        " and p.id = %s::uuid",
        (event_id, user_id),
    )
    return bool(rows[0]["has_access"]) if rows else None


def sent(c: Container, key: str, *, session: str | None = None) -> tuple[str, str] | None:
    """The .eml path and subject of the message sent under `key`, once it is recorded."""
    event_id, kind = key.split("/")
    # Mails that speak of access follow the access subscriber's announcement, not the event
    # (a checkout's, its session).
    recorded = c.db.fetch_all(
        "select event_id from public.sent_emails where event_id = any(%s) and kind = %s",
        (list(announced_ids(event_id, session)), kind),
    )
    mailer = c.mailer
    found = (
        mailer.find(f"{recorded[0]['event_id']}/{kind}")
        if recorded and isinstance(mailer, OutboxMailer)
        else None
    )
    if found is None:
        return None
    with found.open("rb") as file:
        subject = BytesHeaderParser(policy=policy.default).parse(file)["Subject"]
    return str(found), str(subject)


def wait(condition: Callable[[], T | None], what: str) -> T:
    """Poll `condition` until it is not None; DemoFailed after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while (value := condition()) is None:
        if time.monotonic() > deadline:
            raise DemoFailed(f"no {what} within {WAIT:.0f} s (see the log above)")
        time.sleep(0.05)
    return value


if __name__ == "__main__":
    sys.exit(main())
