"""A seeded model-based run through the real pipeline (webhook under gunicorn, the Pub/Sub
emulator, `access` and `emails` under gunicorn, Postgres, Resend's API faked at its boundary),
with faults injected, and four teams whose people join, leave and change roles over the API
between the batches; the end state (and the teams' after each round of changes) must be exactly
the model's. After it, the credits state machine of the suite runs on the same database, its
steps' connections killed mid-transaction (tests/faultrun/credits.py).

FAULT_RUN_SEED picks another scenario (the default is fixed); the seed is printed with the
figures, so a failing run can be replayed. bench/fault_run.py runs the same at 10,000 events.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.db.pool import Database
from dev.stripe_stand_in import StripeStandIn
from tests.conftest import serving
from tests.fakes.resend import FakeResend
from tests.faultrun.model import generate
from tests.faultrun.run import Rig, run
from tests.pubsub_fixtures import (
    PROJECT,
    TOPIC,
    PubSub,
    pubsub_fixture,  # noqa: F401  # pytest finds it by name
)

KINDS = {
    "checkout.session.completed",
    "customer.subscription.created",
    "invoice.paid",
    "invoice.payment_failed",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "charge.refunded",
}
SEED = int(os.environ.get("FAULT_RUN_SEED", "20261123"))


@pytest.fixture
def resend() -> Iterator[FakeResend]:
    yield from serving(FakeResend())


@pytest.mark.long
@pytest.mark.timeout(900)  # about 100 s here; the margin is for a loaded machine
def test_two_thousand_events_with_faults_end_exactly_as_the_model(
    db: Database,
    pubsub: PubSub,
    stripe_fake: StripeStandIn,
    resend: FakeResend,
    tmp_path: Path,
    figure: list[str],
) -> None:
    scenario = generate(seed=SEED, customers=50, events=2000, ghosts=2, batches=4, teams=4)
    rig = Rig(
        database_url=db.url,
        bus=pubsub,
        project=PROJECT,
        topic=TOPIC,
        stripe=stripe_fake,
        resend=resend,
        scratch=tmp_path,
    )
    try:
        report = run(scenario, rig)
    finally:
        pubsub.stop()  # later tests get an emulator without this run's subscriptions
        pubsub.ensure_running()
    figure.extend(report.lines())
    assert report.differences == [], "\n".join(report.differences)
    assert len(scenario.events) >= 2000
    assert len({e.customer for e in scenario.events}) >= 50
    assert {e.type for e in scenario.events} == KINDS
    refunds = {e.grant for e in scenario.events if e.type == "charge.refunded"}
    assert refunds == {False, None}  # full refunds revoke, partial ones change nothing
    plans = {e.price_id for e in scenario.events if e.type == "customer.subscription.updated"}
    assert len(plans - {None}) >= 3  # plan changes moved customers between prices
    # Teams bought seats whose number changed, and their people joined, were refused for want
    # of a seat, left or were removed, and changed roles.
    assert {e.quantity for e in scenario.events if e.customer.team is not None} >= {1, 2, 3}
    changes = {(op.kind, op.status) for ops in scenario.rounds for op in ops}
    assert changes >= {("invite", 201), ("invite", 409), ("accept", 200), ("remove", 204)}
    assert ("role", 200) in changes
    rounds = [scenario.members(upto) for upto in range(len(scenario.rounds))]
    assert any(not seat for found in rounds for _, seat in found.values())  # seats ran short
    # The faults happened (a run without them would prove nothing), and the webhook refused
    # only with 503 while Pub/Sub was down.
    assert all(report.faults.values()), report.faults
    # Consumption went on under the faults: granted, refused when short, and beyond the credits
    # of the metered plan reported to its meter (tests/faultrun/usage.py checks each).
    consumed = str(report.figures["consumptions (each key twice): 200 / 402 / other"])
    ok, refused, other = (int(n) for n in consumed.split(" / "))
    assert ok > 0, consumed
    assert refused > 0, consumed
    assert other == 0, consumed
    counted = str(report.figures["overages counted at the meter (meter events sent)"])
    assert int(counted.split(" ")[0]) > 0, counted
    assert set(report.refused) == {503}
    # The credits state machine ran after the pipeline with its own steps' connections killed
    # mid-transaction (tests/faultrun/credits.py), and equalled its model after every step (a
    # mismatch is among the differences above).
    machine = report.credits_machine
    assert machine.examples > 0, machine
    assert machine.killed_calls > 0, machine
    assert machine.kills >= machine.killed_calls, machine
    # A write killed before its commit, or a call its pool gave up on, sent again by the step.
    assert machine.sent_again > 0, machine
    assert machine.calls > machine.killed_calls, machine  # and most calls went through unharmed
