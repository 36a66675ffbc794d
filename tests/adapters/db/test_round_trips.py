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

from adapters.db.pool import Database
from adapters.db.products import seed_demo_products
from config import Settings
from core.events import parse_event
from runtime.container import Container
from subscribers.access import AccessSubscriber
from tests.helpers import stripe_event
from tests.subscribers.test_access_batches import customers, event

T0 = 1_700_000_000


@dataclass
class TurnCounter:
    """A TCP relay in front of Postgres that counts the client's turns: each time the client
    speaks after the server did is one round trip."""

    target: tuple[str, int]
    turns: int = 0
    _last: str = "server"
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket = field(default_factory=socket.socket)

    def start(self) -> int:
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()
        return int(self._listener.getsockname()[1])

    def reset(self) -> None:
        with self._lock:
            self.turns, self._last = 0, "server"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = _connect(self.target)
            threading.Thread(
                target=self._pump, args=(client, server, "client"), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, "server"), daemon=True
            ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, side: str) -> None:
        while data := _recv(source):
            with self._lock:
                if side == "client" and self._last == "server":
                    self.turns += 1
                self._last = side
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


def test_a_renewal_mail_takes_three_round_trips_and_its_redelivery_one(
    counted: tuple[TurnCounter, str], settings_factory: Callable[..., Settings], db: Database
) -> None:
    """Look-ups (mailed already? the profile, the product) in one, the claim, then the record
    after the send; a redelivery ends at the first."""
    counter, url = counted
    seed_demo_products(db)
    [customer] = customers(db, "rtm", 1)
    container = Container(settings_factory(database_url=url, database_pool_size=1))
    try:
        emails = container.email_subscriber
        invoice = {
            "id": "in_rtm",
            "customer": customer,
            "subscription": f"sub_{customer}",
            "billing_reason": "subscription_cycle",
            "amount_paid": 1900,
            "currency": "usd",
            "lines": {"data": [{"price": {"id": "price_demo_team_monthly"}}]},
        }
        body = stripe_event("invoice.paid", invoice, created=T0, event_id="evt_rtm")
        renewal = parse_event(json.loads(body))
        warm = stripe_event("invoice.paid", {**invoice, "id": "in_w"}, event_id="evt_rtm_warm")
        assert emails(parse_event(json.loads(warm))) == "sent invoice-paid"  # the pool is open
        counter.reset()
        assert emails(renewal) == "sent invoice-paid"
        assert counter.turns == 3
        counter.reset()
        assert emails(renewal) == "duplicate"
        assert counter.turns == 1
    finally:
        container.close()
