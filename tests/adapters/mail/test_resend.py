"""Resend as it behaves: paced to the account's rate, 429 and 5xx retried (Retry-After
honoured), a refused message given up at once, a stuck API abandoned at the deadline."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adapters.mail.message import MailError, UndeliverableEmail, send_email
from adapters.mail.resend import ResendMailer
from tests.conftest import serving
from tests.fakes.http import hanging_server, serve
from tests.fakes.resend import FakeResend
from tests.pooler import authority

SENDER = "Acme Team <hello@acme.example.com>"


@pytest.fixture(scope="module")
def served() -> Iterator[FakeResend]:
    yield from serving(FakeResend(), keep_alive=True)


@pytest.fixture
def fake(served: FakeResend) -> FakeResend:
    served.reset()
    return served


def send(mailer: ResendMailer, n: int = 0) -> dict[str, object]:
    return send_email(
        mailer,
        to="ada@example.com",
        subject=f"Receipt {n}",
        text="t",
        html="<p>h</p>",
        from_=SENDER,
        idempotency_key=f"evt_{n}/invoice-paid",
    )


def test_a_burst_paced_to_the_account_rate_draws_no_429(fake: FakeResend) -> None:
    fake.rate_limit = 2  # Resend's default: 2 requests per second per team
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=2)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda n: send(mailer, n), range(20)))

    assert fake.rate_limited == 0
    assert len(fake.delivered) == 20
    assert len({r["id"] for r in results}) == 20


def test_the_rate_is_read_from_resends_headers_not_assumed(fake: FakeResend) -> None:
    fake.rate_limit = 2
    # Configured far above the account's rate: the first answer's headers correct it.
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    for n in range(6):
        send(mailer, n)

    assert fake.rate_limited == 0
    assert len(fake.delivered) == 6
    assert mailer._pacer.rate == pytest.approx(2.0)


def test_several_sends_are_in_flight_at_once_in_one_process(fake: FakeResend) -> None:
    fake.latency = 0.3  # an internet hop and Resend's own work
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda n: send(mailer, n), range(8)))

    assert len(fake.delivered) == 8
    assert fake.max_in_flight >= 3


def test_sends_reuse_kept_alive_connections(fake: FakeResend) -> None:
    # The SDK's own client opens a connection (in production, a TLS session) per e-mail.
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    for n in range(10):
        send(mailer, n)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda n: send(mailer, n), range(10, 50)))

    calls = fake.server.calls("POST", "/emails")
    assert len(calls) == 50
    assert len({c.client_port for c in calls[:10]}) == 1
    assert len({c.client_port for c in calls}) <= 4


def test_a_connection_resend_closed_is_retried_with_the_same_key(fake: FakeResend) -> None:
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)
    send(mailer, 1)
    fake.server.close_connections()  # Resend's idle timeout, between two sends

    send(mailer, 2)

    assert [c.headers["Idempotency-Key"] for c in fake.server.calls("POST", "/emails")] == [
        "evt_1/invoice-paid",
        "evt_2/invoice-paid",
    ]
    assert len(fake.delivered) == 2


def test_two_mailers_never_send_with_each_others_key(fake: FakeResend) -> None:
    fake.latency = 0.05
    first = ResendMailer("re_first", fake.server.url, timeout=5, rate_per_second=1000)
    second = ResendMailer("re_second", fake.server.url, timeout=5, rate_per_second=1000)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda n: send(first if n % 2 else second, n), range(12)))

    calls = fake.server.calls("POST", "/emails")
    keys = {c.headers["Idempotency-Key"]: c.headers["Authorization"] for c in calls}
    for n in range(12):
        expected = "Bearer re_first" if n % 2 else "Bearer re_second"
        assert keys[f"evt_{n}/invoice-paid"] == expected


def test_a_429_is_retried_after_its_retry_after(fake: FakeResend) -> None:
    limited = {"statusCode": 429, "name": "rate_limit_exceeded", "message": "Too many requests"}
    fake.scripted.append((429, limited, {"retry-after": "1"}))
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    started = time.monotonic()
    send(mailer)

    assert len(fake.delivered) == 1
    assert time.monotonic() - started >= 1.0, "waited as Retry-After asked"
    assert len(fake.server.calls("POST", "/emails")) == 2


def test_a_5xx_is_retried_with_the_same_idempotency_key(fake: FakeResend) -> None:
    fake.failures_left = 2
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    send(mailer, 7)

    calls = fake.server.calls("POST", "/emails")
    assert len(calls) == 3
    assert {c.headers["Idempotency-Key"] for c in calls} == {"evt_7/invoice-paid"}
    assert len(fake.delivered) == 1


def test_a_refused_message_is_given_up_at_once_and_logged(
    fake: FakeResend, caplog: pytest.LogCaptureFixture
) -> None:
    invalid = {"statusCode": 422, "name": "validation_error", "message": "Invalid `to` field"}
    fake.scripted.append((422, invalid, {}))
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    with caplog.at_level(logging.ERROR), pytest.raises(UndeliverableEmail):
        send(mailer)

    assert len(fake.server.calls("POST", "/emails")) == 1
    assert "Invalid `to` field" in caplog.text


def test_persistent_5xx_ends_in_a_mail_error_after_a_few_attempts(fake: FakeResend) -> None:
    fake.failures_left = 10
    mailer = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)

    with pytest.raises(MailError) as info:
        send(mailer)

    assert not isinstance(info.value, UndeliverableEmail)
    assert len(fake.server.calls("POST", "/emails")) == 3


def test_a_stuck_resend_is_abandoned_at_the_deadline() -> None:
    with hanging_server() as url:
        mailer = ResendMailer("re_test", url, timeout=0.3, rate_per_second=1000)
        started = time.monotonic()
        with pytest.raises(MailError):
            send(mailer)
    # Three attempts of 0.3 s plus backoff: seconds, not the SDK's default 30 s per attempt.
    assert time.monotonic() - started < 10


@pytest.fixture(scope="module")
def over_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeResend, Path]]:
    """Resend over HTTPS, its certificate signed by a CA of the test's own."""
    tls = authority(tmp_path_factory.mktemp("resend-tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert, tls.key)
    fake = FakeResend()
    for url in serve(fake.server, tls=context):
        fake.server.url = url
        yield fake, tls.ca
    fake.assert_conforms()


def test_tls_is_verified_against_the_environment_s_ca_bundle(
    over_tls: tuple[FakeResend, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, ca = over_tls
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    untrusted = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)
    with pytest.raises(MailError, match=r"(?i)certificate verify failed"):
        send(untrusted, 1)
    assert fake.delivered == []

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca))  # read when the mailer first sends
    trusted = ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)
    send(trusted, 2)
    assert len(fake.delivered) == 1
