"""Faults injected while events flow: Postgres connections killed in the middle of a
subscriber's transaction, Resend answering 5xx, and Pub/Sub down under the webhook."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg

from tests.fakes.resend import FakeResend
from tests.faultrun.targets import APPLICATION, SUBSCRIBERS

# A subscriber's backend inside a transaction (running a statement, or between statements
# while the e-mail subscriber waits for Resend): killing it rolls the transaction back.
_IN_TRANSACTION = (
    "select pid from pg_stat_activity where application_name = any(%s)"
    " and state in ('active', 'idle in transaction') and xact_start is not null"
)


class Paced:
    """A daemon thread calling `act` once per `every` units of `traffic()` (Stripe's accepted
    deliveries): faults keep pace with the work, and a quiet pipeline is left to recover."""

    def __init__(self, traffic: Callable[[], int], every: int) -> None:
        self._traffic = traffic
        self._every = every
        self._mark = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Paced:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def act(self) -> bool:
        """Inject one fault; False when there was nothing to hit yet (tried again soon)."""
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            if self._traffic() - self._mark >= self._every and self.act():
                self._mark = self._traffic()


class BackendKiller(Paced):
    """`pg_terminate_backend` on one subscriber connection caught inside a transaction."""

    def __init__(self, database_url: str, traffic: Callable[[], int], *, every: int) -> None:
        super().__init__(traffic, every)
        self._url = database_url
        self._names = [APPLICATION.format(name) for name in SUBSCRIBERS]
        self.killed = 0
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def __enter__(self) -> BackendKiller:
        self._conn = psycopg.connect(self._url, autocommit=True)
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self._conn is not None:
            self._conn.close()

    def act(self) -> bool:
        assert self._conn is not None
        # Idle connections are no test of anything: only one inside a transaction is killed.
        rows = self._conn.execute(_IN_TRANSACTION, (self._names,)).fetchall()
        if not rows:
            return False
        [pid] = rows[0]
        row = self._conn.execute("select pg_terminate_backend(%s)", (pid,)).fetchone()
        self.killed += bool(row and row[0])
        return True


class MailerFaults(Paced):
    """Resend answering 500 to the next one or two requests."""

    def __init__(
        self, resend: FakeResend, traffic: Callable[[], int], *, every: int, seed: int
    ) -> None:
        super().__init__(traffic, every)
        self._resend = resend
        self._rng = random.Random(seed)
        self._armed = 0

    def act(self) -> bool:
        burst = self._rng.randint(1, 2)
        self._resend.fail_next(burst)
        self._armed += burst
        return True

    @property
    def answered(self) -> int:
        """How many 5xx Resend has answered so far."""
        return self._armed - self._resend.failures_left


class Outage:
    """Pub/Sub down while the webhook is hit, and back after `after` answers of 503.

    The emulator comes back empty, so its topic and subscriptions are made again; until they
    all exist, a message the webhook accepts could reach no subscription, which real Pub/Sub
    never does: deliveries wait at a gate while the emulator is rebuilt.
    """

    def __init__(self, stop: Callable[[], None], restart: Callable[[], None], after: int) -> None:
        self._restart = restart
        self._after = after
        self._refused = 0
        self._posting = 0
        self._rebuilding = False
        self._done = False
        self._cond = threading.Condition()
        stop()

    @contextmanager
    def gate(self) -> Iterator[None]:
        """Around each delivery: held back while the emulator is rebuilt."""
        with self._cond:
            self._cond.wait_for(lambda: not self._rebuilding)
            self._posting += 1
        try:
            yield
        finally:
            with self._cond:
                self._posting -= 1
                self._cond.notify_all()

    def refused(self) -> None:
        with self._cond:
            self._refused += 1
            if self._refused == self._after:
                threading.Thread(target=self.end, daemon=True).start()

    def end(self) -> None:
        """Rebuild the emulator once no delivery is in flight (once, however often called)."""
        with self._cond:
            if self._done or self._rebuilding:
                self._cond.wait_for(lambda: self._done)
                return
            self._rebuilding = True
            self._cond.wait_for(lambda: self._posting == 0)
        try:
            self._restart()
        finally:
            with self._cond:
                self._rebuilding, self._done = False, True
                self._cond.notify_all()
