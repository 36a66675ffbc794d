"""The service as it runs in production, for the fault run: the API, `access` and `emails`, each
started with `bin/serve` (gunicorn) in its own process, on the given emulator and database."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from pydantic import SecretStr

from config import Settings
from dev import local_google
from dev.local_google import PUSH_ACCOUNT
from dev.processes import Target, start_target
from dev.pubsub_emulator import free_port
from runtime.limits import ROUTE_LIMITS

SUBSCRIBERS = ("access", "emails")
# Each subscriber's connections say who they are, so that faults can pick them out.
APPLICATION = "faultrun-{}"
# POST /api/usage's key (tests/faultrun/usage.py consumes credits with it).
USAGE_KEY = "faultrun-usage-key-0123456789abcdef0123"
# Stripe's events, and the application events access publishes (`revoked_evt_...`; a
# checkout's keyed by its session, `granted_cs_...`).
_HANDLED = re.compile(r"\b(access|emails): (\S+) ((?:[a-z]+_)?(?:evt|cs)_\S+)\s+-> ")
_FAILED = "Exception on / [POST]"


@dataclass
class Log:
    """Reads a target's log as it grows: which events it handled, how many pushes failed."""

    path: Path
    handled: Counter[str] = field(default_factory=Counter)
    failures: int = 0
    _offset: int = 0

    def read(self) -> None:
        with self.path.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read()
        complete = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
        self._offset += complete
        for line in chunk[:complete].decode(errors="replace").splitlines():
            if found := _HANDLED.search(line):
                self.handled[found.group(3)] += 1
            elif _FAILED in line:
                self.failures += 1


@dataclass
class Service:
    api: Target
    subscribers: dict[str, Target]
    logs: dict[str, Log]
    # Where the emulator pushes for each subscriber: local Google, which attaches the push token.
    push_endpoints: dict[str, str] = field(default_factory=dict)

    def endpoints(self) -> dict[str, str]:
        return dict(self.push_endpoints)


def settings(
    *, database_url: str, stripe_url: str, resend_url: str, emulator_host: str, scratch: Path
) -> Settings:
    settings = Settings(
        app_env="test",
        database_url=SecretStr(database_url),
        stripe_secret_key=SecretStr("sk_test_fake"),
        stripe_api_base=stripe_url,  # type: ignore[arg-type]  # pydantic parses the URL
        resend_api_key=SecretStr("re_test_fake"),
        resend_api_url=resend_url,  # type: ignore[arg-type]
        resend_rate_per_second=1000,  # the fake sets no rate: the run is about faults
        email_outbox_dir=scratch / "outbox",
        data_dir=scratch / "data",
        event_bus="pubsub",
        pubsub_emulator_host=emulator_host,
        gunicorn_threads=8,
        usage_api_key=SecretStr(USAGE_KEY),
    )
    # The run's people call the teams' routes far more often than one person would, and its
    # teams invite far more than a team does in a day.
    limits: dict[str, object] = dict.fromkeys(ROUTE_LIMITS.values(), "100000/minute")
    days = {"team_invitations_per_day": 10_000, "invitations_per_person_per_day": 10_000}
    return settings.model_copy(update={**limits, **days})


@contextmanager
def running(base: Settings, *, scratch: Path) -> Iterator[Service]:
    """The three targets; stopped on exit."""
    with ExitStack() as stack:
        # The subscribers refuse a push without Pub/Sub's token: local Google attaches one.
        google = stack.enter_context(local_google.running())
        started: dict[str, Target] = {}
        endpoints: dict[str, str] = {}
        for name in ("api", *SUBSCRIBERS):
            port = free_port()
            update: dict[str, object] = {"database_url": SecretStr(_named(base, name))}
            if name in SUBSCRIBERS:
                audience = f"http://127.0.0.1:{port}"
                update |= {
                    "push_audience": audience,
                    "push_service_account": PUSH_ACCOUNT,
                    "push_certs_url": google.certs_url,
                }
                endpoints[name] = google.push_endpoint(name, to=audience + "/", audience=audience)
            own = base.model_copy(update=update)
            target = start_target(name, own, log=scratch / f"{name}.log", port=port)
            stack.callback(target.stop)
            started[name] = target
        api = started.pop("api")
        yield Service(api, started, {n: Log(t.log) for n, t in started.items()}, endpoints)


def _named(base: Settings, name: str) -> str:
    assert base.database_url is not None
    url = base.database_url.get_secret_value()
    return psycopg.conninfo.make_conninfo(url, application_name=APPLICATION.format(name))
