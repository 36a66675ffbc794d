"""The fault run at scale: `uv run python bench/fault_run.py [--events 10000] [--seed N]`.

The same run as tests/faultrun/ (see bench/README.md): seeded events through the webhook, the
Pub/Sub emulator and both subscribers in their own gunicorn processes, with Postgres connections
killed mid-transaction, Resend answering 5xx and Pub/Sub stopped under the webhook; teams whose
people join, leave and change roles over the API between batches; then the end state compared
with the model. Prints the figures; exits 1 if anything differs from the model.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Run as a script: the project's modules (and its test fakes) sit one level up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dev import local_postgres, pubsub_emulator
from dev.stripe_stand_in import StripeStandIn
from tests.conftest import Fake, serving, serving_stripe
from tests.fakes.resend import FakeResend
from tests.faultrun.model import generate
from tests.faultrun.run import Knobs, Rig, run
from tests.pubsub_fixtures import PROJECT, TOPIC, PubSub


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="The fault run, at scale.")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--customers", type=int, default=250)
    parser.add_argument("--ghosts", type=int, default=3, help="customers never linked")
    parser.add_argument("--teams", type=int, default=20, help="teams buying seats for members")
    parser.add_argument("--batches", type=int, default=8, help="the checkouts, then the rest cut")
    parser.add_argument("--keep", action="store_true", help="keep the logs and the database")
    parser.add_argument("--outages", type=int, default=4, help="batches begun with Pub/Sub down")
    return parser.parse_args()


@contextlib.contextmanager
def fake(api: Fake) -> Iterator[Fake]:
    """A fake SaaS API served on loopback for the duration of the block."""
    served = serving(api)
    yield next(served)
    next(served, None)  # past the yield: the server stops


@contextlib.contextmanager
def fake_stripe(stand_in: StripeStandIn) -> Iterator[StripeStandIn]:
    """The Stripe stand-in served on loopback for the duration of the block."""
    served = serving_stripe(stand_in)
    yield next(served)
    next(served, None)


def main() -> int:
    args = arguments()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("tests.faultrun").setLevel(logging.INFO)
    scenario = generate(
        seed=args.seed,
        customers=args.customers,
        events=args.events,
        ghosts=args.ghosts,
        batches=args.batches,
        teams=args.teams,
    )
    with contextlib.ExitStack() as stack:
        scratch = Path(tempfile.mkdtemp(prefix="fault-run-"))
        if not args.keep:
            stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        print(f"logs in {scratch}", flush=True)
        database_url = stack.enter_context(local_postgres.migrated(scratch / "pg"))
        bus = PubSub(pubsub_emulator.start(project=PROJECT))
        stack.callback(bus.stop)
        stripe = stack.enter_context(fake_stripe(StripeStandIn(demo=False)))
        resend = stack.enter_context(fake(FakeResend()))
        rig = Rig(
            database_url=database_url,
            bus=bus,
            project=PROJECT,
            topic=TOPIC,
            stripe=stripe,
            resend=resend,
            scratch=scratch,
        )
        report = run(scenario, rig, Knobs(outages=args.outages, settle_timeout=300))
    print("\n".join(report.lines()))
    for line in report.differences[:50]:
        print("DIFFERS:", line)
    return 1 if report.differences else 0


if __name__ == "__main__":
    sys.exit(main())
