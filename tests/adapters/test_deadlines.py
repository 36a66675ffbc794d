"""Every outbound call gives up at the configured deadline (well inside a push's
acknowledgement deadline) instead of the SDK's own minutes: checked against a server that
accepts the connection and never answers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from adapters.accounts import AccountError, SupabaseAccounts
from adapters.github_api import GitHubGateway, GitHubUnavailable
from adapters.stripe_api import PaymentsUnavailable, StripeGateway
from adapters.supabase_auth import SupabaseAuth
from adapters.tokens import InvalidToken, TokenVerifier
from tests.fakes.http import hanging_server

DEADLINE = 0.3
# Generous: each SDK retries a couple of times with backoff; the point is seconds, not minutes.
BOUND = 12.0


@pytest.fixture
def stuck() -> Iterator[str]:
    with hanging_server() as url:
        yield url


def gives_up(call: Callable[[], object], *errors: type[BaseException]) -> float:
    started = time.monotonic()
    if errors:
        with pytest.raises(errors):
            call()
    else:
        call()
    return time.monotonic() - started


def test_stripe(stuck: str) -> None:
    stripe = StripeGateway(
        api_key="sk_test_x", api_base=stuck, api_version="2023-08-16", timeout=DEADLINE
    )
    assert (
        gives_up(lambda: stripe.create_checkout_session({"mode": "payment"}), PaymentsUnavailable)
        < BOUND
    )


def test_github(stuck: str) -> None:
    github = GitHubGateway(token="ghp_x", api_url=stuck, timeout=DEADLINE)
    assert (
        gives_up(lambda: github.invite(repository="o/r", username="octocat"), GitHubUnavailable)
        < BOUND
    )


def test_supabase_code_exchange(stuck: str) -> None:
    auth = SupabaseAuth(url=stuck, anon_key="anon", timeout=DEADLINE)
    answers: list[object] = []
    assert gives_up(lambda: answers.append(auth.exchange_code(code="c", code_verifier="v"))) < BOUND
    assert answers == [None], "a stuck exchange is a failed sign-in, not a hang"


def test_supabase_admin_api(stuck: str) -> None:
    accounts = SupabaseAccounts(
        url=stuck, service_role_key="srk", redirect_to=None, timeout=DEADLINE, link_lifetime=3600
    )
    assert gives_up(lambda: accounts.ensure(email="a@example.com", name=None), AccountError) < BOUND
    assert gives_up(lambda: accounts.sign_in_link(email="a@example.com"), AccountError) < BOUND


def test_supabase_jwks(stuck: str) -> None:
    tokens = TokenVerifier(jwt_secret=None, supabase_url=stuck, timeout=DEADLINE)
    claims = {"sub": "00000000-0000-0000-0000-000000000001", "iss": stuck + "/auth/v1"}
    key = ec.generate_private_key(ec.SECP256R1())
    token = jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})
    assert gives_up(lambda: tokens.verify(token), InvalidToken) < BOUND
