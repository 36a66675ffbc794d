"""Where the bench's e-mails go: the Resend stand-in the tests use (POST /emails, idempotency
keys, `ratelimit-*` headers), served over HTTPS with connections kept alive, as Resend's API is,
so the service's e-mail CPU includes the SDK's request and TLS as in production (the outbox, a
local folder, costs otherwise: MIME building and files)."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
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
    resend: FakeResend

    def settings(self) -> dict[str, str]:
        """A sender's environment: Resend's key and URL, the local CA trusted by requests."""
        return {
            "RESEND_API_KEY": "re_bench",
            "RESEND_API_URL": self.url,
            "RESEND_RATE_PER_SECOND": str(RATE),
            "REQUESTS_CA_BUNDLE": str(self.ca),
        }


@contextlib.contextmanager
def resend_sink(scratch: Path) -> Iterator[Sink]:
    tls = authority(scratch / "resend-tls")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert, tls.key)
    fake = FakeResend(rate_limit=RATE)
    for url in serve(fake.server, keep_alive=True, tls=context):
        yield Sink(url, tls.ca, fake)
