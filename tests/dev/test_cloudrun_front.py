"""The stand-in of Cloud Run's front (dev/cloudrun_front.py) and of Google's side of a push
(dev/local_google.py), against a recording target on loopback."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from google.auth import jwt
from werkzeug.wrappers import Request, Response

from dev import cloudrun_front, local_google
from dev.cloudrun_front import CloudRunFront
from dev.local_google import PUSH_ACCOUNT, LocalGoogle, id_token_claims, sign
from tests.fakes.http import FakeServer, json_response, serve
from tests.helpers import HANG_GUARD, wait_for

INVOKERS = frozenset({PUSH_ACCOUNT})


@dataclass
class Target:
    """A container behind the front: answers `status`, and `/slow` only once `released`."""

    server: FakeServer = field(default_factory=FakeServer)
    status: int = 200
    released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.server.route("/", ("GET", "POST"), self._answer)
        self.server.route("/slow", ("POST",), self._slow)

    def _answer(self, request: Request) -> Response:
        return json_response({"seen": True}, status=self.status, headers={"X-Target": "yes"})

    def _slow(self, request: Request) -> Response:
        self.released.wait()
        return json_response({})

    def authorization(self, header: str = "Authorization") -> str | None:
        [request] = self.server.requests
        return request.headers.get(header)


@pytest.fixture
def google() -> Iterator[LocalGoogle]:
    with local_google.running() as running:
        yield running


@pytest.fixture
def target() -> Iterator[Target]:
    fake = Target()
    for url in serve(fake.server):
        fake.server.url = url
        yield fake
        fake.released.set()


@pytest.fixture
def front(target: Target, google: LocalGoogle) -> Iterator[CloudRunFront]:
    with cloudrun_front.running(target.server.url, google, invokers=INVOKERS) as running:
        yield running


def post(
    url: str, token: str | None = None, headers: dict[str, str] | None = None
) -> requests.Response:
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return requests.post(url, json={"message": {}}, headers=headers, timeout=HANG_GUARD)


def test_the_token_reaches_the_target_with_its_signature_removed(
    front: CloudRunFront, google: LocalGoogle, target: Target
) -> None:
    token = google.token(audience=front.url)
    response = post(front.url + "/", token)
    assert (response.status_code, response.json()) == (200, {"seen": True})
    assert response.headers["X-Target"] == "yes"
    header, payload, _ = token.split(".")
    assert target.authorization() == f"Bearer {header}.{payload}.SIGNATURE_REMOVED_BY_GOOGLE"
    assert target.server.requests[0].headers["X-Forwarded-For"] == "127.0.0.1"


def test_the_target_status_is_passed_back(
    front: CloudRunFront, google: LocalGoogle, target: Target
) -> None:
    # Pub/Sub retries a push the service did not acknowledge with a 2xx.
    target.status = 500
    assert post(front.url + "/", google.token(audience=front.url)).status_code == 500


def test_refusals_never_reach_the_target(
    front: CloudRunFront, google: LocalGoogle, target: Target
) -> None:
    now = int(time.time())
    claims = id_token_claims(audience=front.url, email=PUSH_ACCOUNT)
    refused = {
        "no token": (None, 403),
        "not an invoker": (
            google.token(audience=front.url, email="x@p.iam.gserviceaccount.com"),
            403,
        ),
        "another service's audience": (google.token(audience="https://other.run.app"), 401),
        "expired": (
            sign(claims | {"exp": now - 60, "iat": now - 3660}, google.key, google.kid),
            401,
        ),
        "not Google's signature": (sign(claims, local_google.new_key(), google.kid), 401),
        "removed signature": (local_google.remove_signature(google.token(audience=front.url)), 401),
    }
    for case, (token, status) in refused.items():
        assert post(front.url + "/", token).status_code == status, case
    assert target.server.requests == []


def test_x_serverless_authorization_is_checked_instead(
    front: CloudRunFront, google: LocalGoogle, target: Target
) -> None:
    token = google.token(audience=front.url)
    response = post(front.url + "/", "app-token", {"X-Serverless-Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert target.authorization() == "Bearer app-token"
    stripped = target.authorization("X-Serverless-Authorization") or ""
    assert stripped.endswith(".SIGNATURE_REMOVED_BY_GOOGLE")


def test_the_request_timeout_cuts_a_slow_answer(target: Target, google: LocalGoogle) -> None:
    with cloudrun_front.running(target.server.url, google, invokers=INVOKERS, timeout=0.5) as front:
        response = post(front.url + "/slow", google.token(audience=front.url))
        # The target answers only once released: an answer while it still holds the request
        # is the front's own, at its timeout, however slow the machine.
        assert not target.released.is_set()
    assert response.status_code == 504


def test_google_attaches_the_push_token_the_emulator_cannot(
    front: CloudRunFront, google: LocalGoogle, target: Target
) -> None:
    endpoint = google.push_endpoint("access", to=front.url + "/", audience=front.url)
    assert post(endpoint).status_code == 200  # no token from the emulator
    [request] = target.server.requests
    claims = jwt.decode(request.headers["Authorization"].split()[1], verify=False)  # type: ignore[no-untyped-call]
    assert (claims["email"], claims["aud"], claims["email_verified"]) == (
        PUSH_ACCOUNT,
        front.url,
        True,
    )
    assert requests.post(google.url + "/push/emails", timeout=HANG_GUARD).status_code == 404


def test_the_certificates_verify_googles_tokens(google: LocalGoogle) -> None:
    certs = requests.get(google.certs_url, timeout=HANG_GUARD).json()
    assert list(certs) == [google.kid]
    assert certs[google.kid].startswith("-----BEGIN CERTIFICATE-----")
    claims = jwt.decode(google.token(audience="a"), certs=certs, audience="a")  # type: ignore[no-untyped-call]
    assert claims["email"] == PUSH_ACCOUNT


CONTAINER = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
def on_term(*_):
    marker.write_text("SIGTERM")
    if sys.argv[2] == "exits":
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
marker.write_text("ready")
time.sleep(120)
"""


@pytest.mark.parametrize("behaviour", ["exits", "ignores"])
def test_stop_gives_the_container_sigterm_then_sigkill_after_the_grace(
    target: Target, google: LocalGoogle, tmp_path: Path, behaviour: str
) -> None:
    marker = tmp_path / "marker"
    process = subprocess.Popen(
        [sys.executable, "-c", CONTAINER, str(marker), behaviour], start_new_session=True
    )
    wait_for(lambda: marker.exists() and marker.read_text() == "ready")
    with cloudrun_front.running(
        target.server.url, google, invokers=INVOKERS, process=process
    ) as front:
        front.grace = 1.0  # Cloud Run gives 10 s (the default); the test need not wait that long
    assert marker.read_text() == "SIGTERM"
    assert process.returncode == (0 if behaviour == "exits" else -9)
    assert cloudrun_front.SHUTDOWN_GRACE_SECONDS == 10
