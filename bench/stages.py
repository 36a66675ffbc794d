"""CPU per event of each stage, in one process without HTTP: `uv run python bench/stages.py`.

Calls the service's own code as the targets do (the webhook service function, the access and
e-mail subscribers with the outbox transport) on unique signed `invoice.paid` renewals, then on
the same events again (duplicates). CPU is this process's (`time.process_time`), one thread, so
it is exactly the stage's Python cost; Postgres's own CPU is reported beside it. See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from load import Events, signature
from servers import postgres, postgres_cpu, server_env

from adapters.mail.message import send_email
from config import DEV_WEBHOOK_SECRET, Settings
from core.events import Event, parse_event
from emails.plan import Recipient, plan
from emails.render import render
from events.intake import receive
from runtime.api import build_api
from runtime.container import Container


@dataclass
class Stage:
    name: str
    events: int
    cpu: float  # seconds of this process
    postgres: float  # seconds of Postgres's processes
    wall: float

    def line(self) -> str:
        per = 1000 / self.events
        return (
            f"{self.name:<34}{self.events:>7}{self.cpu * per:>10.3f}{self.postgres * per:>10.3f}"
            f"{self.events / self.wall:>10.0f}"
        )


class _Discard:
    """A bus that keeps nothing: the route's own cost without the bus's."""

    def publish(self, event: Event, data: bytes) -> None:
        pass

    def drain(self, timeout: float) -> bool:
        return True

    def close(self, timeout: float = 5.0) -> None:
        pass


def timed(name: str, count: int, database_url: str, work: Callable[[int], object]) -> Stage:
    pg_before = postgres_cpu(database_url)
    cpu_before, wall_before = time.process_time(), time.time()
    for i in range(count):
        work(i)
    wall, cpu = time.time() - wall_before, time.process_time() - cpu_before
    return Stage(name, count, cpu, postgres_cpu(database_url) - pg_before, wall)


def stages(container: Container, events: Events, count: int, database_url: str) -> list[Stage]:
    bodies = [events.body(i) for i in range(count)]
    parsed = [parse_event(json.loads(body)) for body in bodies]
    access, emails = container.access_subscriber, container.email_subscriber
    brand = container.brand
    to = Recipient(email="ada@example.com", name="Ada")
    planned = [plan(event, to=to, product=None, site_url=brand.site_url) for event in parsed]
    settings = container.settings

    def route(i: int) -> None:
        body = bodies[i]
        receive(
            payload=body,
            signature=signature(body, DEV_WEBHOOK_SECRET),
            secret=DEV_WEBHOOK_SECRET,
            livemode=None,
            bus=_Discard(),
        )

    def render_one(i: int) -> None:
        p = planned[i]
        assert p is not None
        render(p.kind, p.props, brand=brand)

    def render_and_hand(i: int) -> None:
        p = planned[i]
        assert p is not None
        content = render(p.kind, p.props, brand=brand)
        send_email(
            container.mailer,
            to=p.to,
            subject=content.subject,
            text=content.text,
            html=content.html,
            from_=settings.email_from_admin,
            reply_to=settings.support_email,
            idempotency_key=f"bench-{events.prefix}-{i}",
        )

    container.__dict__["bus"] = _Discard()  # what the WSGI route publishes goes nowhere
    client = build_api(container).test_client()

    def wsgi_route(i: int) -> None:
        body = bodies[i]
        headers = {"Stripe-Signature": signature(body, DEV_WEBHOOK_SECRET)}
        answer = client.post("/api/webhook/payments", data=body, headers=headers)
        assert answer.status_code == 200, answer.get_data(as_text=True)

    warm = count // 10
    for i in range(warm):  # first use builds the pool, templates, the inliner
        access(parsed[i])
        emails(parsed[i])
        wsgi_route(i)
    rest = count - warm
    half, batch = warm + rest // 2, 64

    def access_batch(j: int) -> None:
        """Events from `half` on, `batch` at a time (as the in-process bus hands them over)."""
        if j % batch == 0:
            results = access.apply_many(parsed[half + j : min(half + j + batch, count)])
            assert not [r for r in results if isinstance(r, Exception)], results

    def shift(work: Callable[[int], object]) -> Callable[[int], object]:
        return lambda i: work(i + warm)

    return [
        timed("route (verify, parse, publish)", rest, database_url, shift(route)),
        timed("route over WSGI (Flask, no socket)", rest, database_url, shift(wsgi_route)),
        timed("access: apply", rest // 2, database_url, shift(lambda i: access(parsed[i]))),
        timed("access: duplicate", rest // 2, database_url, shift(lambda i: access(parsed[i]))),
        timed(f"access: apply, {batch} at a time", count - half, database_url, access_batch),
        timed(f"access: duplicate, {batch} at a time", count - half, database_url, access_batch),
        timed(
            "emails: plan, render, send, record",
            rest,
            database_url,
            shift(lambda i: emails(parsed[i])),
        ),
        timed("emails: duplicate", rest, database_url, shift(lambda i: emails(parsed[i]))),
        timed("e-mail: render", rest, database_url, shift(render_one)),
        timed("e-mail: render + hand to outbox", rest, database_url, shift(render_and_hand)),
    ]


@contextlib.contextmanager
def container_on(scratch: Path, database_url: str) -> Iterator[Container]:
    env = server_env(scratch, database_url)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environ(env))
        container = Container(Settings())
        stack.callback(container.close)
        yield container


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    import os

    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def report(results: list[Stage]) -> None:
    print(f"\n{'stage':<34}{'events':>7}{'CPU ms':>10}{'PG ms':>10}{'per s':>10}")
    for stage in results:
        print(stage.line())
    print("CPU ms: this process per event; PG ms: Postgres's processes per event")


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU per event of each stage, in process.")
    parser.add_argument("--events", type=int, default=2000, help="events per stage (<= 20000)")
    parser.add_argument("--customers", type=int, default=128, help="distinct Stripe customers")
    args = parser.parse_args()
    if not 100 <= args.events <= 20_000:
        parser.error("keep it bounded: 100-20000 events")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        scratch = Path(tmp)
        with postgres(scratch, args.customers) as url, container_on(scratch, url) as container:
            events = Events(prefix=f"stg{int(time.time())}", customers=args.customers)
            report(stages(container, events, args.events, url))


if __name__ == "__main__":
    main()
