"""Where the bench's e-mails go: the Resend stand-in the tests use (POST /emails, idempotency
keys, `ratelimit-*` headers), served over HTTPS with connections kept alive, as Resend's API is,
so the service's e-mail CPU includes the SDK's request and TLS as in production (the outbox, a
local folder, costs otherwise: MIME building and files).

It runs in a process of its own: in the bench's, it shared one interpreter lock with the
Postgres delay relay and took e-mail's pace from it (about 160 answers a second)."""

from __future__ import annotations

import contextlib
import multiprocessing
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from tests.fakes.http import serve
from tests.fakes.resend import FakeResend
from tests.pooler import authority

# Requests per second the stand-in allows and announces in its headers: above what one machine
# sends, so the sink never paces the bench (Resend's default is 2; see docs/capacity.md).
RATE = 1000


@dataclass(frozen=True)
class Sink:
    url: str
    ca: Path

    def settings(self) -> dict[str, str]:
        """A sender's environment: Resend's key and URL, the local CA trusted by the client."""
        return {
            "RESEND_API_KEY": "re_bench",
            "RESEND_API_URL": self.url,
            "RESEND_RATE_PER_SECOND": str(RATE),
            "REQUESTS_CA_BUNDLE": str(self.ca),
        }


def _serve(cert: Path, key: Path, pipe: Connection) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    # Not held against Resend's document here: the checks' CPU would be counted as the sink's
    # pace; the suite holds the same exchanges against it.
    fake = FakeResend(rate_limit=RATE, conformance=False)
    for url in serve(fake.server, keep_alive=True, tls=context):
        pipe.send(url)
        pipe.recv()  # until the bench says stop, or goes away (EOFError)


@contextlib.contextmanager
def resend_sink(scratch: Path) -> Iterator[Sink]:
    """A new stand-in (nothing kept from an earlier system's mails) in a child process."""
    tls = authority(scratch / "resend-tls")
    parent, child = multiprocessing.get_context("spawn").Pipe()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(tls.cert, tls.key, child), daemon=True
    )
    process.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the Resend stand-in did not start")
        yield Sink(parent.recv(), tls.ca)
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()
