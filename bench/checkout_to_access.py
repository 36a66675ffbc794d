"""From paid to access, as the buyer sees it: `uv run python bench/checkout_to_access.py`.

The deployed design on loopback (EVENT_BUS=pubsub, as `make run EVENT_BUS=pubsub` runs it: the
api, and the access and emails targets behind the Pub/Sub emulator's push subscriptions) with the
local Stripe stand-in. For each buyer, one after another, Stripe's part is played here: the
session is marked paid at the stand-in and, at that moment, its signed `checkout.session.completed`
is posted to the webhook, while the buyer's browser lands on the success page and either

- `webhook`: polls `GET /api/me` (every `--poll` ms) until it shows access, or
- `route`: calls `POST /api/payments/complete-checkout` with the session id, then `GET /api/me`.

It prints, per way, the time from "marked paid" until `GET /api/me` first showed the access
(p50, p99, max) and how many buyers saw it in their first `GET /api/me`; then it waits for the
e-mails and checks each session got exactly one purchase confirmation. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
import requests
from servers import postgres
from systems import pubsub

from adapters.stripe_api import sign
from adapters.tokens import issue_token
from config import DEV_JWT_SECRET, DEV_WEBHOOK_SECRET
from dev import stripe_stand_in

PRICE = "price_demo_team_monthly"


def buyers(database_url: str, count: int) -> list[tuple[str, str]]:
    """`count` signed-up users without a purchase: (user id, e-mail)."""
    made = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        for n in range(count):
            user_id, email = str(uuid.uuid4()), f"buyer{n}-{uuid.uuid4().hex[:6]}@example.com"
            conn.execute("insert into auth.users (id, email) values (%s, %s)", (user_id, email))
            made.append((user_id, email))
    return made


def paid_session(session_id: str, user_id: str, email: str, n: int) -> dict[str, Any]:
    return {
        "id": session_id,
        "object": "checkout.session",
        "client_reference_id": user_id,
        "customer": f"cus_{session_id}",
        "subscription": f"sub_{session_id}",
        "mode": "subscription",
        "metadata": {"price_id": PRICE, "user_id": user_id},
        "payment_status": "paid",
        "status": "complete",
        "amount_total": 1900,
        "currency": "usd",
        "created": int(time.time()) - 30,
        "customer_details": {"email": email, "name": f"Buyer {n}"},
    }


def send_webhook(api: str, session: dict[str, Any]) -> None:
    body = json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "api_version": "2023-08-16",
            "created": int(time.time()),
            "livemode": False,
            "type": "checkout.session.completed",
            "data": {"object": session},
        }
    ).encode()
    header = sign(body, secret=DEV_WEBHOOK_SECRET, timestamp=int(time.time()))
    answer = requests.post(
        api + "/api/webhook/payments",
        data=body,
        headers={"Stripe-Signature": header, "Content-Type": "application/json"},
        timeout=30,
    )
    answer.raise_for_status()


def has_access(api: str, token: str) -> bool:
    answer = requests.get(api + "/api/me", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    answer.raise_for_status()
    return bool(answer.json()["hasAccess"])


def one_buyer(
    api: str, stand_in: Any, way: str, buyer: tuple[str, str], n: int, poll: float
) -> tuple[float, bool]:
    """Seconds from paid to access seen, and whether the first GET /api/me showed it."""
    user_id, email = buyer
    token = issue_token(secret=DEV_JWT_SECRET, user_id=user_id, email=email, supabase_url=None)
    session_id = f"cs_test_bench_{way}_{uuid.uuid4().hex[:12]}"
    session = paid_session(session_id, user_id, email, n)
    started = time.perf_counter()
    stand_in.hold_session(session)  # paid, at Stripe (its metadata names the price)
    webhook = threading.Thread(target=send_webhook, args=(api, session))
    webhook.start()  # Stripe sends the event as it redirects the buyer
    if way == "route":
        answer = requests.post(
            api + "/api/payments/complete-checkout",
            json={"sessionId": session_id},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        answer.raise_for_status()
    first = True
    while not has_access(api, token):
        first = False
        time.sleep(poll)
    elapsed = time.perf_counter() - started
    webhook.join()
    return elapsed, first


def confirmations(database_url: str, recipients: list[str]) -> dict[str, int]:
    """Purchase confirmations sent, by recipient (each bought once)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "select recipient, count(*) from public.sent_emails"
            " where kind = 'purchase-confirmation' and recipient = any(%s) group by recipient",
            (recipients,),
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buyers", type=int, default=30, help="buyers per way (30)")
    parser.add_argument("--poll", type=float, default=25, help="GET /api/me every N ms (25)")
    parser.add_argument("--drain", type=float, default=60, help="seconds to wait for mails")
    args = parser.parse_args()
    poll = args.poll / 1000
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the stand-in's request lines
    with tempfile.TemporaryDirectory(prefix="bench-checkout-") as tmp:
        scratch = Path(tmp)
        (scratch / "data").mkdir()
        with (
            postgres(scratch, customers=0) as url,
            stripe_stand_in.running() as stand_in,
            pubsub(
                scratch,
                url,
                1,
                8,
                "bench-checkout",
                {},
                extra={
                    "stripe_secret_key": stripe_stand_in.API_KEY,
                    "stripe_api_base": stand_in.url,
                    # One client polls from one address: out of the per-client limits' way.
                    "rate_limit_me": "100000/minute",
                    "rate_limit_complete_checkout": "100000/minute",
                },
            ) as system,
        ):
            api = f"http://127.0.0.1:{system.port}"
            people = buyers(url, 2 * args.buyers + 2)
            # Warm-up: every process has built its clients before the timing starts.
            for n, way in enumerate(("webhook", "route")):
                one_buyer(api, stand_in, way, people.pop(), n, poll)
            results: dict[str, list[tuple[float, bool]]] = {"webhook": [], "route": []}
            mailed: dict[str, list[str]] = {"webhook": [], "route": []}
            for n in range(args.buyers):  # the two ways alternate, so drift hits both alike
                for way in ("webhook", "route"):
                    buyer = people.pop()
                    results[way].append(one_buyer(api, stand_in, way, buyer, n, poll))
                    mailed[way].append(buyer[1])
            print(f"{args.buyers} buyers per way, GET /api/me polled every {args.poll:g} ms")
            print(f"{'way':<8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  first GET /api/me")
            for way, found in results.items():
                ms = [seconds * 1000 for seconds, _ in found]
                firsts = sum(1 for _, first in found if first)
                print(
                    f"{way:<8} {statistics.median(ms):8.0f} {quantile(ms, 0.99):8.0f}"
                    f" {max(ms):8.0f}  {firsts}/{len(found)} showed access"
                )
            deadline = time.monotonic() + args.drain
            for way, recipients in mailed.items():
                while (
                    len(sent := confirmations(url, recipients)) < len(recipients)
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.5)
                twice = sum(1 for count in sent.values() if count > 1)
                print(
                    f"{way:<8} purchase confirmations: {len(sent)}/{len(recipients)} buyers,"
                    f" {twice} told twice"
                )


if __name__ == "__main__":
    main()
