"""Mail transports: the .eml outbox on disk, and Resend through a local server speaking its API."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import AnyHttpUrl, SecretStr

from adapters.mail.message import MailError, OutgoingEmail, send_email
from adapters.mail.outbox import OutboxMailer
from adapters.mail.resend import MAX_ATTEMPTS, ResendMailer
from config import Settings
from runtime.container import Container
from tests.conftest import serving
from tests.fakes.resend import FakeResend

SENDER = "Acme Team <hello@acme.example.com>"
TEXT = "Hi Ada,\n\nThanks for your order ORD-1001.\n"
HTML = "<!DOCTYPE html><html><body><p>Hi Ada, thanks for your order ORD-1001.</p></body></html>"


def resend_mailer(key: str, url: str) -> ResendMailer:
    """A Resend mailer that does not pace (these tests are not about the rate)."""
    return ResendMailer(key, url, timeout=5, rate_per_second=1000)


def _send(mailer: Any, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "to": "ada@example.com",
        "subject": "Order confirmed: Starter Kit",
        "text": TEXT,
        "html": HTML,
        "from_": SENDER,
    }
    return send_email(mailer, **(fields | overrides))


def _read(path: Path) -> EmailMessage:
    with path.open("rb") as file:
        message = BytesParser(policy=default).parse(file)
    assert isinstance(message, EmailMessage)
    return message


# --- outbox ---------------------------------------------------------------------------------


def test_outbox_writes_a_complete_multipart_eml(tmp_path: Path) -> None:
    mailer = OutboxMailer(tmp_path / "outbox")

    result = _send(
        mailer,
        to=["ada@example.com", "grace@example.com"],
        subject="Café ☕: your order is confirmed",
        reply_to="support@acme.example.com",
        idempotency_key="evt_123:purchase-confirmation",
    )

    path = Path(result["path"])
    assert path.parent == tmp_path / "outbox"
    assert re.fullmatch(r"\d{8}T\d{12}Z-[0-9a-f]{16}\.eml", path.name)
    message = _read(path)
    assert message["From"] == SENDER
    assert message["From"].addresses[0].addr_spec == "hello@acme.example.com"
    assert message["To"] == "ada@example.com, grace@example.com"
    assert message["Reply-To"] == "support@acme.example.com"
    assert message["Subject"] == "Café ☕: your order is confirmed"
    assert message["Date"].datetime.tzinfo is not None
    assert message["Message-ID"] == f"<{result['id']}>"
    assert result["id"].endswith("@acme.example.com")
    assert message["X-Idempotency-Key"] == "evt_123:purchase-confirmation"
    assert message.get_content_type() == "multipart/alternative"
    text_part, html_part = message.iter_parts()
    assert text_part.get_content_type() == "text/plain"
    assert text_part.get_content() == TEXT
    assert html_part.get_content_type() == "text/html"
    assert html_part.get_content().strip() == HTML


def test_outbox_encodes_non_ascii_headers_for_the_wire(tmp_path: Path) -> None:
    mailer = OutboxMailer(tmp_path)

    result = _send(mailer, subject="Reçu de paiement", from_="Équipe Acme <hello@acme.example.com>")

    raw_headers = Path(result["path"]).read_bytes().split(b"\n\n", 1)[0]
    raw_headers.decode("ascii")  # RFC 2047 encoded words only, no raw UTF-8 in headers
    assert _read(Path(result["path"]))["Subject"] == "Reçu de paiement"


def test_outbox_files_sort_in_sending_order_and_leave_no_temporary_files(tmp_path: Path) -> None:
    mailer = OutboxMailer(tmp_path)

    subjects = [f"Message {n}" for n in range(5)]
    for subject in subjects:
        _send(mailer, subject=subject)

    assert [_read(path)["Subject"] for path in mailer.messages()] == subjects
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".eml")) == [".lock"]
    assert not list(tmp_path.rglob("*.tmp"))


def test_outbox_writes_a_key_once_and_returns_the_first_result(tmp_path: Path) -> None:
    mailer = OutboxMailer(tmp_path)

    first = _send(mailer, idempotency_key="evt_1:invoice-paid")
    again = _send(mailer, subject="A different retry", idempotency_key="evt_1:invoice-paid")
    other = _send(mailer, idempotency_key="evt_2:invoice-paid")
    unkeyed = [_send(mailer), _send(mailer)]

    assert again == first
    assert other["id"] != first["id"]
    assert len({r["path"] for r in unkeyed}) == 2
    assert len(mailer.messages()) == 4
    assert _read(Path(first["path"]))["Subject"] == "Order confirmed: Starter Kit"


def test_outbox_idempotency_holds_under_concurrent_sends(tmp_path: Path) -> None:
    mailers = [OutboxMailer(tmp_path) for _ in range(4)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [
            pool.submit(_send, mailers[n % 4], idempotency_key="evt_9:payment-failed")
            for n in range(16)
        ]
        results = [future.result() for future in futures]

    assert len({r["path"] for r in results}) == 1
    assert len(mailers[0].messages()) == 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"subject": "Hello\r\nBcc: victim@example.com"},
        {"subject": "Hello\nX-Spam: yes"},
        {"to": "ada@example.com\r\nBcc: victim@example.com"},
        {"to": ["ada@example.com", "grace@example.com\nCc: victim@example.com"]},
        {"reply_to": "support@acme.example.com\r\nBcc: victim@example.com"},
        {"from_": "Acme <hello@acme.example.com>\r\nBcc: victim@example.com"},
        {"from_": "Acme\n <hello@acme.example.com>"},
        {"idempotency_key": "evt_1\r\nX-Injected: 1"},
    ],
)
def test_header_injection_is_refused_before_anything_is_written(
    tmp_path: Path, overrides: dict[str, Any]
) -> None:
    mailer = OutboxMailer(tmp_path)

    with pytest.raises(ValueError, match="line breaks"):
        _send(mailer, **overrides)
    assert mailer.messages() == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"to": "not-an-address"},
        {"to": "ada@"},
        {"to": "ada@localhost"},
        {"to": []},
        {"to": "Ada <ada@example.com>"},
        {"reply_to": ["support@acme.example.com", "nobody"]},
        {"from_": "Acme <not-an-address>"},
        {"from_": "hello@"},
        {"subject": "   "},
        {"idempotency_key": "k" * 257},
    ],
)
def test_invalid_addresses_and_fields_are_refused(
    tmp_path: Path, overrides: dict[str, Any]
) -> None:
    mailer = OutboxMailer(tmp_path)

    with pytest.raises(ValueError):  # noqa: PT011 - the messages differ per field
        _send(mailer, **overrides)
    assert mailer.messages() == []


def test_a_plain_sender_address_is_accepted() -> None:
    email = OutgoingEmail(to=("ada@example.com",), subject="s", text="t", html="h", from_="a@b.io")
    assert email.sender.addr_spec == "a@b.io"
    assert email.sender.display_name == ""
    with pytest.raises(TypeError):
        OutgoingEmail(to="ada@example.com", subject="s", text="t", html="h", from_="a@b.io")  # type: ignore[arg-type]


def test_the_container_picks_the_outbox_without_a_resend_key(tmp_path: Path) -> None:
    mailer = Container(Settings(resend_api_key=None, email_outbox_dir=tmp_path / "out")).mailer

    assert isinstance(mailer, OutboxMailer)
    assert not (tmp_path / "out").exists()  # nothing happens before the first send


# --- Resend, against a local server speaking its API ---------------------------------------


@pytest.fixture
def resend_api() -> Iterator[FakeResend]:
    """Resend's fake (tests/fakes/resend.py): what crosses it is held against Resend's
    published OpenAPI document."""
    yield from serving(FakeResend())


def test_resend_request_matches_the_documented_api(resend_api: FakeResend) -> None:
    mailer = resend_mailer("re_test_123", resend_api.server.url)

    result = _send(
        mailer,
        to=["ada@example.com"],
        reply_to="support@acme.example.com",
        idempotency_key="evt_1:purchase-confirmation",
    )

    (request,) = resend_api.server.requests
    assert result == {"id": resend_api.sent_ids()[0]}
    assert (request.method, request.path) == ("POST", "/emails")
    assert request.headers["Authorization"] == "Bearer re_test_123"
    assert request.headers["Idempotency-Key"] == "evt_1:purchase-confirmation"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json() == {
        "from": SENDER,
        "to": ["ada@example.com"],
        "subject": "Order confirmed: Starter Kit",
        "html": HTML,
        "text": TEXT,
        "reply_to": ["support@acme.example.com"],
    }


def test_resend_without_key_or_reply_to_sends_neither(resend_api: FakeResend) -> None:
    _send(resend_mailer("re_test_123", resend_api.server.url + "/"))

    (request,) = resend_api.server.requests
    assert request.path == "/emails"
    assert "Idempotency-Key" not in request.headers
    assert "reply_to" not in request.json()


def test_the_container_uses_resend_with_the_configured_url(resend_api: FakeResend) -> None:
    settings = Settings(
        resend_api_key=SecretStr("re_live_abc"), resend_api_url=AnyHttpUrl(resend_api.server.url)
    )
    mailer = Container(settings).mailer

    _send(mailer)

    assert isinstance(mailer, ResendMailer)
    assert "re_live_abc" not in repr(mailer)
    (request,) = resend_api.server.requests
    assert request.path == "/emails"
    assert request.headers["Authorization"] == "Bearer re_live_abc"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, {"statusCode": 500, "name": "application_error", "message": "Unexpected error"}),
        (422, {"statusCode": 422, "name": "validation_error", "message": "Invalid `to` field"}),
        (429, {"statusCode": 429, "name": "rate_limit_exceeded", "message": "Too many requests"}),
        (403, {"statusCode": 403, "name": "invalid_api_key", "message": "API key is invalid"}),
    ],
)
def test_resend_errors_are_logged_and_raised_as_mail_error(
    resend_api: FakeResend,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: dict[str, Any],
) -> None:
    # The same answer to every attempt: the retried statuses too end in a MailError.
    resend_api.scripted = [(status, body, {})] * MAX_ATTEMPTS

    with caplog.at_level(logging.ERROR, logger="adapters.mail"), pytest.raises(MailError) as info:
        _send(resend_mailer("re_test_123", resend_api.server.url))

    assert str(status) in str(info.value)
    assert body["message"] in caplog.text


def test_an_unreachable_resend_is_a_mail_error() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()  # nothing listens on this port any more

    with pytest.raises(MailError):
        _send(resend_mailer("re_test_123", f"http://127.0.0.1:{port}"))


def test_concurrent_mailers_never_mix_their_api_keys(resend_api: FakeResend) -> None:
    mailers = {key: resend_mailer(key, resend_api.server.url) for key in ("re_team_a", "re_team_b")}

    with ThreadPoolExecutor(max_workers=8) as pool:
        jobs = [pool.submit(_send, mailers[key], subject=key) for key in list(mailers) * 10]
        for job in jobs:
            job.result()

    assert len(resend_api.server.requests) == 20
    for request in resend_api.server.requests:
        assert request.headers["Authorization"] == f"Bearer {request.json()['subject']}"


def test_importing_the_adapter_loads_no_sdk_and_builds_nothing() -> None:
    code = (
        "import sys, adapters.mail.resend, adapters.mail.outbox\n"
        "assert 'resend' not in sys.modules, 'resend imported'"
    )
    root = Path(__file__).resolve().parents[3]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
