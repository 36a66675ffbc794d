"""Consumption under the run's faults: while each batch of Stripe's deliveries flows (grants
granted, ended and refunded under the consumptions' feet), bursts of POST /api/usage for the
run's customers, each key sent twice; the reporter's Postgres connections are killed with the
access target's, and Pub/Sub is down under the first batches, so announcements of overage are
lost and the sweep must find them. Checked at the end against
invariants, since the balance depends on the order grants and consumptions met in: every
answer the same for its key, the ledger equal to what the grants say was used, no grant
overdrawn, every overage reported to the meter once with its units."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import requests
from psycopg.rows import dict_row

from dev.stripe_stand_in import StripeStandIn
from tests.faultrun.targets import USAGE_KEY

METER = "faultrun_generations"
# What the run's products grant (tests/faultrun/run.py seeds them): the monthly demo plan is
# billed on the meter beyond its credits.
PERIOD_CREDITS, PACK_CREDITS = 12, 8
TRIES = 20  # a consumption answered 5xx (its connection killed) is sent again, same key


class Usage:
    def __init__(self, api_url: str, database_url: str, users: Sequence[str], seed: int) -> None:
        self.url = api_url + "/api/usage"
        self.database_url = database_url
        self.users = list(users)
        self.rng = random.Random(seed)
        self.answers: dict[str, tuple[int, Any]] = {}
        self.differences: list[str] = []
        self.sent = 0
        self.retried = 0
        self._lock = threading.Lock()
        self._session = requests.Session()
        self._session.trust_env = False

    def burst(self, index: int, size: int) -> None:
        """`size` consumptions of 1 to 3 generations over the run's customers, in parallel;
        then each key once more, which must answer as it did."""
        plan = [
            (f"fr-{index}-{n}", self.rng.choice(self.users), self.rng.randint(1, 3))
            for n in range(size)
        ]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self._first, plan))
            list(pool.map(self._again, plan))

    def _send(self, key: str, user: str, amount: int) -> tuple[int, Any]:
        body = {"userId": user, "feature": "generations", "amount": amount, "key": key}
        headers = {"Authorization": f"Bearer {USAGE_KEY}"}
        for _ in range(TRIES):
            with self._lock:
                self.sent += 1
            try:
                answer = self._session.post(self.url, json=body, headers=headers, timeout=30)
            except requests.ConnectionError:
                answer = None
            if answer is not None and answer.status_code < 500:
                return answer.status_code, answer.json()
            with self._lock:
                self.retried += 1
        return 0, None

    def _first(self, planned: tuple[str, str, int]) -> None:
        key = planned[0]
        self.answers[key] = self._send(*planned)
        if self.answers[key][0] not in (200, 402):
            self.differences.append(f"usage {key}: answered {self.answers[key]}")

    def _again(self, planned: tuple[str, str, int]) -> None:
        key, first = planned[0], self.answers[planned[0]]
        again = self._send(*planned)
        if again != first:
            self.differences.append(f"usage {key}: first {first}, again {again}")

    def figures(self, stripe: StripeStandIn) -> dict[str, object]:
        statuses = Counter(status for status, _ in self.answers.values())
        other = len(self.answers) - statuses[200] - statuses[402]
        posts = [r.form()["identifier"] for r in stripe.calls("POST", "/v1/billing/meter_events")]
        counted = [k for k in stripe.meter_events if k.startswith("fr-")]
        return {
            "consumptions (each key twice): 200 / 402 / other": (
                f"{statuses[200]} / {statuses[402]} / {other}"
            ),
            "consumptions sent again after a 5xx or a broken connection": self.retried,
            "overages counted at the meter (meter events sent)": f"{len(counted)} ({len(posts)})",
        }

    def check(self, stripe: StripeStandIn) -> list[str]:
        """The ledger against the grants and the answers; every overage reported once."""
        found = list(self.differences)
        with psycopg.connect(self.database_url, row_factory=dict_row) as conn:
            uses = {
                r["key"]: r
                for r in conn.execute(
                    "select key, state, covered, overage, reported_at, report_error,"
                    " customer_id from public.credit_uses where key like 'fr-%'"
                ).fetchall()
            }
            balance = conn.execute(
                "select g.account_id, sum(g.used) as used, bool_or(g.used > g.amount) as over"
                " from public.credit_grants g group by g.account_id"
            ).fetchall()
            ledger = {
                r["account_id"]: r["covered"]
                for r in conn.execute(
                    "select account_id, sum(covered) as covered from public.credit_uses"
                    " where state = 'consumed' group by account_id"
                ).fetchall()
            }
        for key, (status, _) in self.answers.items():
            state = uses.get(key, {}).get("state")
            if (status, state) not in ((200, "consumed"), (402, "refused")):
                found.append(f"usage {key}: answered {status}, recorded {state}")
        for row in balance:
            if row["over"]:
                found.append(f"credits of account {row['account_id']} overdrawn")
            if row["used"] != ledger.get(row["account_id"], 0):
                found.append(
                    f"credits of account {row['account_id']}: grants used {row['used']},"
                    f" consumptions took {ledger.get(row['account_id'], 0)}"
                )
        over = {k: r for k, r in uses.items() if r["overage"] > 0}
        found += [f"overage {k} not reported" for k, r in over.items() if r["reported_at"] is None]
        found += [f"overage {k}: {r['report_error']}" for k, r in over.items() if r["report_error"]]
        counted = {k: e for k, e in stripe.meter_events.items() if k.startswith("fr-")}
        found += [f"overage {k} not at the meter" for k in sorted(over.keys() - counted.keys())]
        found += [f"meter event {k} of no overage" for k in sorted(counted.keys() - over.keys())]
        for key in over.keys() & counted.keys():
            event, row = counted[key], over[key]
            if (event["payload"]["value"], event["payload"]["stripe_customer_id"]) != (
                str(row["overage"]),
                row["customer_id"],
            ):
                found.append(f"meter event {key}: {event['payload']}, overage {row['overage']}")
        return found
