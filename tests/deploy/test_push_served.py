"""`access` served by `bin/serve` with push authentication on, reached as on Cloud Run: through
the stand-in of Cloud Run's front (dev/cloudrun_front.py), which checks the push token and
forwards it with its signature removed; and reached directly, as an attacker would if the
service were exposed, with every wrong token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from dev import cloudrun_front, local_google
from dev.local_google import PUSH_ACCOUNT, LocalGoogle, id_token_claims, remove_signature, sign
from dev.pubsub_emulator import free_port
from dev.samples.catalogue import seed_demo_products
from tests.deploy import test_serve
from tests.helpers import HANG_GUARD, create_user
from tests.runtime.test_targets import completed_body, profile_access, push_envelope

INVOKERS = frozenset({PUSH_ACCOUNT})
serve = test_serve.serve  # the fixture: a target started with `bin/serve`


@pytest.fixture
def google() -> Iterator[LocalGoogle]:
    with local_google.running() as running:
        yield running


@pytest.fixture
def front_url() -> str:
    """The front's URL, known before the target starts: it is the target's PUSH_AUDIENCE."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def access(serve: Callable[..., str], google: LocalGoogle, front_url: str) -> str:
    return serve(
        "access",
        push_audience=front_url,
        push_service_account=PUSH_ACCOUNT,
        push_certs_url=google.certs_url,
    )


def push(url: str, db: Database, token: str | None) -> tuple[int, bool]:
    """POST a push for a new user; the status, and whether the user got access."""
    seed_demo_products(db)
    user = create_user(db, f"{time.monotonic_ns()}@example.com")
    body = completed_body(user, event_id=f"evt_{time.monotonic_ns()}")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = requests.post(
        url + "/", json=push_envelope(body), headers=headers, timeout=HANG_GUARD
    )
    return response.status_code, profile_access(db, user)


def test_a_push_through_cloud_runs_front_is_applied(
    access: str, google: LocalGoogle, front_url: str, db: Database
) -> None:
    port = int(front_url.rsplit(":", 1)[1])
    with cloudrun_front.running(access, google, invokers=INVOKERS, port=port) as front:
        assert push(front.url, db, google.token(audience=front_url)) == (200, True)
        # The front refuses on its own what it cannot verify; the target never sees it.
        assert push(front.url, db, None) == (403, False)
        assert push(front.url, db, google.token(audience="http://elsewhere")) == (401, False)
        stranger = google.token(
            audience=front_url, email="someone@local-project.iam.gserviceaccount.com"
        )
        assert push(front.url, db, stranger) == (403, False)


def test_every_other_token_is_401_at_the_target(
    access: str, google: LocalGoogle, front_url: str, db: Database
) -> None:
    def token(removed: bool = True, key: Any = None, **changes: Any) -> str:
        signed = sign(
            id_token_claims(audience=front_url, email=PUSH_ACCOUNT) | changes,
            key or google.key,
            google.kid,
        )
        return remove_signature(signed) if removed else signed

    now = int(time.time())
    refused = {
        "wrong account": token(email="someone@evil.example"),
        "wrong audience": token(aud="https://saas-emails-1.europe-west1.run.app"),
        "expired": token(exp=now - 120, iat=now - 3720),
        "unverified email": token(email_verified=False),
        "foreign signature": token(removed=False, key=local_google.new_key()),
        "expired, signed": token(removed=False, exp=now - 120, iat=now - 3720),
        "garbage": "garbage",
    }
    for case, bad in refused.items():
        assert push(access, db, bad) == (401, False), case
    assert push(access, db, None) == (401, False)
    # The same push with the right claims, in the form the front forwards, is applied.
    assert push(access, db, token()) == (200, True)


def test_health_check_answers_without_a_token_and_nothing_else_does(access: str) -> None:
    health = requests.get(access + "/healthz", timeout=HANG_GUARD)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert requests.post(access + "/healthz", timeout=HANG_GUARD).status_code == 401
    assert requests.get(access + "/", timeout=HANG_GUARD).status_code == 401
