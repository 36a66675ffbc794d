"""Round trips to Postgres, counted on the wire: with Supabase an internet hop away (10-25 ms
each way), they, not statements, bound what an instance applies per second."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from access.subscriber import AccessSubscriber
from adapters.db.pool import Database
from config import Settings
from core.events import parse_event
from dev.samples.catalogue import seed_demo_products
from runtime.container import Container
from tests.access.test_subscriber_batches import customers, event
from tests.helpers import stripe_event

T0 = 1_700_000_000


# Client messages after which it waits for the server: Sync, Flush (a pipeline asking for the
# answers so far) and a simple Query.
_ASKS = frozenset(b"HSQ")
_FLUSH = ord("H")
# Startup-phase requests with no type byte that another untyped message follows.
_NEGOTIATIONS = frozenset({80877103, 80877104})  # SSLRequest, GSSENCRequest


@dataclass
class TurnCounter:
    """A TCP relay in front of Postgres that counts the client's turns: each time the client
    speaks again after it asked for answers (Sync, Flush, Query) and the server answered is one
    round trip. Answers that arrive while the client is still writing its pipeline (a BEGIN's,
    under load) are not a turn: the client had not asked for them yet."""

    target: tuple[str, int]
    turns: int = 0
    _asked: bool = True
    _answered: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket = field(default_factory=socket.socket)

    def start(self) -> int:
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()
        return int(self._listener.getsockname()[1])

    def reset(self) -> None:
        with self._lock:
            self.turns, self._asked, self._answered = 0, True, True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = _connect(self.target)
            threading.Thread(target=self._from_client, args=(client, server), daemon=True).start()
            threading.Thread(target=self._from_server, args=(server, client), daemon=True).start()

    def _from_client(self, source: socket.socket, sink: socket.socket) -> None:
        pending, typed = b"", False
        while data := _recv(source):
            kinds: list[int] = []
            pending += data
            while True:
                head = 1 if typed else 0
                if len(pending) < head + 4:
                    break
                size = head + int.from_bytes(pending[head : head + 4], "big")
                if len(pending) < size:
                    break
                if typed:
                    kinds.append(pending[0])
                elif int.from_bytes(pending[4:8], "big") not in _NEGOTIATIONS:
                    typed = True  # the startup message: typed messages from now on
                pending = pending[size:]
            # A Flush alone (psycopg sends one right after a Sync) asks for nothing new.
            work = not kinds or any(kind != _FLUSH for kind in kinds)
            with self._lock:
                if work and self._asked and self._answered:
                    self.turns += 1
                if work:
                    self._answered = False
                if kinds:
                    self._asked = kinds[-1] in _ASKS
            sink.sendall(data)
        sink.close()

    def _from_server(self, source: socket.socket, sink: socket.socket) -> None:
        while data := _recv(source):
            with self._lock:
                self._answered = True
            sink.sendall(data)
        sink.close()


def _connect(target: tuple[str, int]) -> socket.socket:
    host, port = target
    if host.startswith("/"):  # a Unix socket directory, as the embedded server listens
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.connect(f"{host}/.s.PGSQL.{port}")
        return unix
    return socket.create_connection(target)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


@pytest.fixture
def counted(database_url: str) -> Iterator[tuple[TurnCounter, str]]:
    params = conninfo_to_dict(database_url)
    counter = TurnCounter((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    port = counter.start()
    yield counter, make_conninfo(database_url, host="127.0.0.1", port=port)
    counter._listener.close()


@pytest.fixture
def access_over(
    counted: tuple[TurnCounter, str], settings_factory: Callable[..., Settings]
) -> Iterator[AccessSubscriber]:
    _, url = counted
    container = Container(settings_factory(database_url=url, database_pool_size=1))
    yield replace(container.access_subscriber, publish=lambda event, data: None)
    container.close()


@pytest.mark.parametrize("size", [1, 8])
def test_an_access_change_takes_two_round_trips_alone_or_in_a_batch(
    counted: tuple[TurnCounter, str], access_over: AccessSubscriber, db: Database, size: int
) -> None:
    counter, _ = counted
    linked = customers(db, f"rt{size}x", size)
    warm = event("paid", linked[0], created=T0, event_id=f"evt_rt{size}_warm")
    assert access_over.apply_many([warm]) == ["granted"]  # the pool's connection is open now

    counter.reset()
    batch = [
        event("deleted", customer, created=T0 + 10, event_id=f"evt_rt{size}_{n}")
        for n, customer in enumerate(linked)
    ]
    assert access_over.apply_many(batch) == ["revoked"] * size
    assert counter.turns == 2

    counter.reset()
    assert access_over.apply_many(batch) == ["duplicate"] * size  # a redelivery: still two
    assert counter.turns <= 2


def test_a_renewal_mail_takes_two_round_trips_and_its_redelivery_one(
    counted: tuple[TurnCounter, str], settings_factory: Callable[..., Settings], db: Database
) -> None:
    """The claim with what planning needs (the profile, the product) in one, then the record
    after the send; a redelivery ends at the first (its claim finds the mail sent)."""
    counter, url = counted
    seed_demo_products(db)
    [customer] = customers(db, "rtm", 1)
    container = Container(settings_factory(database_url=url, database_pool_size=1))
    try:
        emails = container.email_subscriber
        renewal = parse_event(json.loads(renewal_body(customer, "evt_rtm")))
        warm = renewal_body(customer, "evt_rtm_warm")
        assert emails(parse_event(json.loads(warm))) == "sent invoice-paid"  # the pool is open
        counter.reset()
        assert emails(renewal) == "sent invoice-paid"
        assert counter.turns == 2
        counter.reset()
        assert emails(renewal) == "duplicate"
        assert counter.turns == 1
    finally:
        container.close()


def test_a_batch_of_renewal_mails_takes_two_round_trips_and_its_redelivery_one(
    counted: tuple[TurnCounter, str], settings_factory: Callable[..., Settings], db: Database
) -> None:
    """What the pull consumer hands e-mail: eight renewals of eight customers, claimed and
    looked up together, then recorded together."""
    counter, url = counted
    seed_demo_products(db)
    linked = customers(db, "rtb", 8)
    container = Container(settings_factory(database_url=url, database_pool_size=1))
    try:
        emails = container.email_subscriber
        batch = [
            parse_event(json.loads(renewal_body(customer, f"evt_rtb{n}")))
            for n, customer in enumerate(linked)
        ]
        warm = parse_event(json.loads(renewal_body(linked[0], "evt_rtb_warm")))
        assert emails.send_many([warm]) == ["sent invoice-paid"]  # the pool is open
        counter.reset()
        assert emails.send_many(batch) == ["sent invoice-paid"] * 8
        assert counter.turns == 2
        counter.reset()
        assert emails.send_many(batch) == ["duplicate"] * 8
        assert counter.turns == 1
    finally:
        container.close()


def renewal_body(customer: str, event_id: str) -> bytes:
    invoice = {
        "id": f"in_{event_id}",
        "customer": customer,
        "subscription": f"sub_{customer}",
        "billing_reason": "subscription_cycle",
        "amount_paid": 1900,
        "currency": "usd",
        "lines": {"data": [{"price": {"id": "price_demo_team_monthly"}}]},
    }
    return stripe_event("invoice.paid", invoice, created=T0, event_id=event_id)
