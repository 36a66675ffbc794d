"""The fault run: the scenario's deliveries through the real service, faults injected, then the
end state compared with the model. Shared by tests/faultrun/ and bench/fault_run.py."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import psycopg

from adapters.db.pool import Database
from config import Settings
from credits import store as credits
from credits.rules import overage_recorded
from dev import stripe_shapes as shapes
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from runtime.consumers import subscription_of
from runtime.container import Container
from tests.fakes.resend import FakeResend
from tests.faultrun import credits as faulty_credits
from tests.faultrun import targets
from tests.faultrun.check import access_outcomes, differences, teams_now
from tests.faultrun.faults import BackendKiller, MailerFaults, Outage
from tests.faultrun.members import Members
from tests.faultrun.model import Scenario
from tests.faultrun.steps import SEAT_PRICE
from tests.faultrun.stripe import Stripe
from tests.faultrun.usage import METER, PACK_CREDITS, PERIOD_CREDITS, Usage
from tests.faultrun.watch import DeadLetters, Settler, replay

log = logging.getLogger(__name__)

CREDITS_MACHINE = (
    "credits machine: examples, steps' calls to Postgres, calls killed mid-transaction"
    " (connections killed, calls sent again by the step), mismatches"
)


class Bus(Protocol):
    """The Pub/Sub emulator as tests/pubsub_fixtures.py's PubSub drives it."""

    @property
    def host(self) -> str: ...
    def stop(self) -> None: ...
    def ensure_running(self) -> None: ...
    def ensure_topology(self, push_endpoints: dict[str, str]) -> None: ...


@dataclass(frozen=True)
class Rig:
    database_url: str
    bus: Bus
    project: str
    topic: str
    stripe: StripeStandIn
    resend: FakeResend
    scratch: Path


@dataclass(frozen=True)
class Knobs:
    outages: int = 2  # batches whose delivery starts with Pub/Sub down
    consumptions: int = 120  # POST /api/usage per batch, beside its deliveries
    kill_every: int = 40  # deliveries accepted between Postgres connections killed
    mailer_fault_every: int = 25  # e-mails delivered between bursts of Resend 500s
    settle_timeout: float = 240.0  # a batch settles in seconds; the margin is for a loaded machine
    # The credits state machine, its connections killed mid-transaction (tests/faultrun/credits.py)
    credits_examples: int = 10
    credits_steps: int = 30


@dataclass
class Report:
    figures: dict[str, object] = field(default_factory=dict)
    refused: Counter[int] = field(default_factory=Counter)  # webhook answers other than 200
    faults: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)
    credits_machine: faulty_credits.Figures = field(default_factory=faulty_credits.Figures)

    def lines(self) -> list[str]:
        return [f"{name}: {value}" for name, value in self.figures.items()]


def run(scenario: Scenario, rig: Rig, knobs: Knobs = Knobs()) -> Report:
    started = time.monotonic()
    _seed_database(scenario, rig.database_url)
    for session in scenario.sessions():
        rig.stripe.hold_session(session)
    rig.stripe.meters["mtr_faultrun"] = shapes.meter(
        "mtr_faultrun", display_name="Generations", event_name=METER, created=int(time.time())
    )
    rig.bus.stop()  # a fresh emulator: nothing left over from earlier runs or tests
    rig.bus.ensure_running()
    base = targets.settings(
        database_url=rig.database_url,
        stripe_url=rig.stripe.url,
        resend_url=rig.resend.server.url,
        emulator_host=rig.bus.host,
        scratch=rig.scratch,
    )
    dead = DeadLetters(rig.project, f"{rig.topic}-dead-letter")
    with targets.running(base, scratch=rig.scratch) as service:
        endpoints = service.endpoints()
        settler = Settler(
            rig.project,
            rig.topic,
            service.logs,
            dead,
            announced=lambda: _announced(scenario, rig.database_url),
        )
        rig.bus.ensure_topology(endpoints)
        assert base.jwt_secret is not None
        emails = f"projects/{rig.project}/subscriptions/{subscription_of(rig.topic, 'emails')}"
        members = Members(
            service.api.url,
            base.jwt_secret,
            rig.resend,
            replay=lambda since: replay(rig.bus.host, [emails], since),
        )
        members.create(scenario.owners())
        stripe = Stripe(service.api.url + "/api/webhook/payments")
        buyers = [str(c.user_id) for c in scenario.customers if c.user_id and c.team is None]
        usage = Usage(service.api.url, rig.database_url, buyers, scenario.seed)
        killer = BackendKiller(rig.database_url, stripe.traffic, every=knobs.kill_every)
        mailer = MailerFaults(
            rig.resend,
            lambda: len(rig.resend.delivered),
            every=knobs.mailer_fault_every,
            seed=scenario.seed,
        )
        outages, changing = 0, 0.0
        with killer, mailer:
            for index, batch in enumerate(scenario.batches):
                changing += _changed(scenario, members, rig.database_url, index)
                outage = None
                if 0 < index <= knobs.outages:
                    outage, outages = _outage(rig.bus, endpoints), outages + 1
                posting, since = time.monotonic(), time.time() - 1
                consuming = threading.Thread(
                    target=usage.burst, args=(index, knobs.consumptions), daemon=True
                )
                consuming.start()
                stripe.deliver(members.bound(batch), outage=outage)
                consuming.join()
                settling = time.monotonic()
                settler.settle(
                    stripe.accepted,
                    emulator_host=rig.bus.host,
                    since=since,
                    timeout=knobs.settle_timeout,
                )
                log.info(
                    "batch %d: %d deliveries posted in %.1f s, settled in %.1f s more",
                    index,
                    len(batch),
                    settling - posting,
                    time.monotonic() - settling,
                )
            changing += _changed(scenario, members, rig.database_url, len(scenario.batches))
        swept = _swept(base, rig.database_url)
        report = Report(
            figures=_figures(
                scenario, stripe, killer, mailer, service, dead, started, outages, settler.replays
            )
            | {
                "membership changes: API calls, seconds (checks included)": (
                    f"{members.calls}, {changing:.1f} s"
                )
            },
            refused=stripe.refused,
            faults={
                "killed": killer.killed,
                "mailer 5xx": mailer.answered,
                "outages": outages,
            },
        )
        report.figures |= usage.figures(rig.stripe) | {
            "overages announced again by the sweep (lost while Pub/Sub was down)": swept,
        }
    report.differences = members.differences + differences(
        scenario,
        database_url=rig.database_url,
        resend=rig.resend,
        dead=dead,
        accepted=stripe.accepted,
        topic=rig.topic,
        teams=members.teams,
    )
    report.differences += usage.check(rig.stripe)
    # After the checks above, which read every account: the machine adds its own.
    machine, found = faulty_credits.run(
        rig.database_url,
        seed=scenario.seed,
        examples=knobs.credits_examples,
        steps=knobs.credits_steps,
        stripe=rig.stripe,
    )
    report.differences += found
    report.credits_machine = machine
    report.faults["credits machine calls killed"] = machine.killed_calls
    report.figures[CREDITS_MACHINE] = (
        f"{machine.examples}, {machine.calls}, {machine.killed_calls}"
        f" ({machine.kills}, {machine.sent_again}), {len(found)}"
    )
    report.figures["e-mails delivered"] = len(rig.resend.delivered)
    report.figures["mismatches with the model"] = len(report.differences)
    return report


def _swept(base: Settings, url: str, timeout: float = 120.0) -> int:
    """`flask --app main credits report`'s sweep, with the api's settings: the overages whose
    announcement was lost announced again; then waits until every overage is reported (the
    access target reports them). How many it announced."""
    container = Container(base)
    try:
        keys = credits.unreported(container.db, older_than_seconds=0)
        for key in keys:
            container.bus.publish(*overage_recorded(key, datetime.now(UTC)))
        container.bus.drain(30)
        deadline = time.monotonic() + timeout
        while credits.unreported(container.db, older_than_seconds=0):
            if time.monotonic() > deadline:
                break  # what is left is told as a difference
            time.sleep(0.2)
    finally:
        container.close()
    return len(keys)


def _changed(scenario: Scenario, members: Members, url: str, index: int) -> float:
    """Round `index` of membership changes, then the teams checked against the model as it
    left them; the seconds it took."""
    if not scenario.rounds:
        return 0.0
    started = time.monotonic()
    members.play(scenario.rounds[index])
    members.differences += teams_now(scenario, url, members.teams, index)
    return time.monotonic() - started


def _announced(scenario: Scenario, url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return scenario.announcements(access_outcomes(conn))


def _outage(bus: Bus, endpoints: dict[str, str]) -> Outage:
    def restart() -> None:
        bus.ensure_running()
        bus.ensure_topology(endpoints)

    return Outage(bus.stop, restart, after=4)


def _seed_database(scenario: Scenario, url: str) -> None:
    people = [(c.user_id, c.email, c.name) for c in scenario.customers if c.team is None]
    people += [(p.user_id, p.email, p.name) for p in scenario.people]
    with psycopg.connect(url, autocommit=True) as conn:
        for user_id, email, name in people:
            if user_id is not None:
                conn.execute(
                    "insert into auth.users (id, email, raw_user_meta_data) values (%s, %s, %s)",
                    (user_id, email, json.dumps({"full_name": name})),
                )
        # The teams' plan, sold per seat.
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, per_seat) values ('Seats', 12, %s, 'link', 'subscription',"
            " 'month', true)",
            (SEAT_PRICE,),
        )
    db = Database(lambda: url, max_size=1)
    seed_demo_products(db)
    db.close()
    # Credits: each paid period of a plan grants some, each one-time purchase a pack; beyond
    # them, the monthly demo plan is billed on a meter (its holders are never refused).
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "update public.products set credits = jsonb_build_object('generations',"
            " case when billing_type = 'subscription' then %s else %s end),"
            " credits_period = case when billing_type = 'subscription' then 'period'"
            " else 'once' end where stripe_price_id <> %s",
            (PERIOD_CREDITS, PACK_CREDITS, SEAT_PRICE),
        )
        conn.execute(
            "update public.products set meter = %s where stripe_price_id = %s",
            (METER, "price_demo_team_monthly"),
        )


def _changes(scenario: Scenario) -> Counter[str]:
    return Counter(f"{op.kind} {op.status}" for ops in scenario.rounds for op in ops)


def _figures(
    scenario: Scenario,
    stripe: Stripe,
    killer: BackendKiller,
    mailer: MailerFaults,
    service: targets.Service,
    dead: DeadLetters,
    started: float,
    outages: int,
    replays: int,
) -> dict[str, object]:
    seconds = time.monotonic() - started
    kinds: Counter[str] = Counter(e.type for e in scenario.events)
    return {
        "seed": scenario.seed,
        "customers (never linked)": (
            f"{sum(c.user_id is not None and c.team is None for c in scenario.customers)}"
            f" ({sum(c.user_id is None for c in scenario.customers)})"
        ),
        "teams (members who buy nothing), membership changes over the API": (
            f"{len(scenario.teams)} ({len(scenario.people)}),"
            f" {', '.join(f'{k} {n}' for k, n in _changes(scenario).items()) or 'none'}"
        ),
        "events": f"{len(scenario.events)} ({', '.join(f'{k} {n}' for k, n in kinds.items())})",
        "guest purchases under a customer's address, with a new Stripe customer": sum(
            e.guest for e in scenario.events
        ),
        "deliveries (each event 1-3 times, shuffled, in batches)": (
            f"{scenario.deliveries} in {len(scenario.batches)} batches"
        ),
        "webhook answers: 200 / other": (
            f"{sum(stripe.accepted.values())} / {dict(stripe.refused) or 0}"
        ),
        "sent again by Stripe after a non-200": stripe.resent,
        "Pub/Sub outages (emulator stopped, back empty)": outages,
        "Postgres connections killed mid-transaction": killer.killed,
        "Resend 5xx answered": mailer.answered,
        "pushes failed and redelivered (access, emails)": (
            f"{service.logs['access'].failures}, {service.logs['emails'].failures}"
        ),
        "dead letters": sum(dead.found.values()),
        "replays (seek) of a subscription the emulator stopped pushing": replays,
        "duration": f"{seconds:.1f} s ({len(scenario.events) / seconds:.0f} events/s)",
    }
