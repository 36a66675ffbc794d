"""Each target started with the exact command the container runs (`bin/serve`), answering."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from access.announcements import Recipient, access_granted
from access.checkouts import checkout_from
from adapters.db.pool import Database
from adapters.supabase_auth import storage_key
from config import PRODUCTION_REQUIRED_BY_TARGET, Settings
from core.events import parse_event
from dev import local_google
from dev.local_google import PUSH_ACCOUNT, LocalGoogle
from dev.processes import environment
from dev.samples.catalogue import seed_demo_products
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for
from tests.runtime.test_targets import completed_body, profile_access, push_envelope

ROOT = Path(__file__).resolve().parents[2]
# Every production setting but the push ones, plausible and not public.
PRODUCTION_STAND_INS = {
    "database_url": "postgresql://u:p@127.0.0.1:1/db",
    "site_url": "https://shop.acme.dev",
    "supabase_url": "https://ref.supabase.co",
    "supabase_publishable_key": "sb_publishable_stand_in",
    "supabase_secret_key": "sb_secret_stand_in",
    "stripe_secret_key": "sk_live_stand_in",
    "stripe_publishable_key": "pk_live_stand_in",
    "stripe_webhook_secret": "whsec_stand_in",
    "resend_api_key": "re_stand_in",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(target: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`bin/serve` in its own process group, its output in `log` (a pipe could fill and block)."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(ROOT / "bin" / "serve")],
            env={
                **os.environ,
                **env,
                "FUNCTION_TARGET": target,
                "PORT": str(port),
                "WEB_CONCURRENCY": "1",
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, f"http://127.0.0.1:{port}"


def answers(url: str) -> bool:
    try:
        requests.get(url + "/healthz", timeout=HANG_GUARD)
    except requests.RequestException:
        return False
    return True


@pytest.fixture
def serve(
    settings_factory: Callable[..., Settings], db: Database, tmp_path: Path
) -> Iterator[Callable[..., str]]:
    """`run(target, **settings)`: the target served by `bin/serve`, answering; its URL."""
    processes: list[subprocess.Popen[bytes]] = []

    def run(target: str, **overrides: Any) -> str:
        log = tmp_path / f"{target}.log"
        process, url = start(target, environment(settings_factory(**overrides)), log)
        processes.append(process)
        wait_for(lambda: answers(url) or process.poll() is not None)
        assert process.poll() is None, log.read_text()
        return url

    yield run
    for process in processes:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)


def test_api_answers_on_healthz(serve: Callable[..., str]) -> None:
    url = serve("api")
    response = requests.get(url + "/healthz", timeout=HANG_GUARD)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.fixture
def google() -> Iterator[LocalGoogle]:
    with local_google.running() as running:
        yield running


def test_the_served_api_refuses_what_is_too_large_or_too_deep_with_a_4xx(
    serve: Callable[..., str], settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    # Gunicorn itself sets no body limit: the app's (MAX_CONTENT_LENGTH) answers, in JSON,
    # whether the length is declared or the body comes in chunks.
    url = serve("api")
    huge = b"[" * (2 * 1024 * 1024)
    json_type = {"Content-Type": "application/json"}
    declared = requests.post(url + "/api/lead", data=huge, headers=json_type, timeout=HANG_GUARD)
    chunked = requests.post(
        url + "/api/lead",
        data=iter([huge[:1024], huge[1024:]]),
        headers=json_type,
        timeout=HANG_GUARD,
    )
    for response in (declared, chunked):
        assert response.status_code == 413
        assert response.json() == {"error": "Request body too large"}
    session = storage_key(str(settings_factory().supabase_url))
    deep = requests.get(
        url + "/api/me", headers={"Cookie": f"{session}={'[' * 1500}"}, timeout=HANG_GUARD
    )
    assert deep.status_code == 401
    assert deep.json() == {"error": "Sign in required"}
    # A header past gunicorn's own limit (8190 bytes a field) never reaches the app: gunicorn
    # answers it, with a 4xx, and logs it as a warning.
    long = requests.get(url + "/api/me", headers={"Cookie": "a=" + "x" * 9000}, timeout=HANG_GUARD)
    assert 400 <= long.status_code < 500
    log = (tmp_path / "api.log").read_text()
    assert "Invalid request" in log
    assert "[error" not in log
    assert "Traceback" not in log


@pytest.mark.parametrize("target", ["access", "emails"])
def test_subscriber_answers_a_push_request(
    serve: Callable[..., str], db: Database, target: str, google: LocalGoogle
) -> None:
    audience = f"https://saas-{target}.run.invalid"
    url = serve(
        target,
        push_audience=audience,
        push_service_account=PUSH_ACCOUNT,
        push_certs_url=google.certs_url,
    )
    user = create_user(db, "served@example.com")
    body = stripe_event(
        "checkout.session.completed",
        {
            "id": "cs_served",
            "client_reference_id": user,
            "customer": "cus_served",
            "payment_status": "paid",
            "metadata": {"price_id": "price_x"},
            "amount_total": 100,
            "currency": "usd",
            "customer_details": {"email": "served@example.com"},
        },
    )
    if target == "emails":
        # The purchase confirmation follows what access announces once it has committed.
        source = parse_event(json.loads(body))
        checkout = checkout_from(source)
        assert checkout is not None
        _, body = access_granted(
            source,
            checkout,
            to=Recipient(email="served@example.com", name=None),
            price_id="price_x",
            receipt_url=None,
        )
    envelope = {
        "message": {"data": base64.b64encode(body).decode(), "messageId": "1", "attributes": {}},
        "subscription": f"projects/p/subscriptions/{target}",
    }
    table = "processed_events" if target == "access" else "sent_emails"
    count = f"select count(*) as n from public.{table}"  # noqa: S608
    # Without Pub/Sub's token, refused and nothing done.
    assert requests.post(url, json=envelope, timeout=HANG_GUARD).status_code == 401
    assert db.fetch_all(count) == [{"n": 0}]
    token = {"Authorization": f"Bearer {google.token(audience=audience)}"}
    response = requests.post(url, json=envelope, headers=token, timeout=HANG_GUARD)
    assert response.status_code == 200
    assert db.fetch_all(count) == [{"n": 1}]


@pytest.mark.parametrize("target", ["access", "emails"])
def test_a_subscriber_without_push_settings_refuses_every_push(
    serve: Callable[..., str], db: Database, target: str, google: LocalGoogle
) -> None:
    url = serve(target, push_certs_url=google.certs_url)
    seed_demo_products(db)
    user = create_user(db, "unguarded@example.com")
    body = completed_body(user)
    for headers in ({}, {"Authorization": f"Bearer {google.token(audience=url)}"}):
        response = requests.post(
            url + "/", json=push_envelope(body), headers=headers, timeout=HANG_GUARD
        )
        assert (response.status_code, response.json()) == (
            401,
            {"error": "Invalid or missing push token"},
        )
    assert not profile_access(db, user)
    assert db.fetch_all("select count(*) as n from public.processed_events") == [{"n": 0}]
    assert db.fetch_all("select count(*) as n from public.sent_emails") == [{"n": 0}]


@pytest.mark.parametrize("target", ["access", "emails"])
def test_a_production_push_target_without_push_settings_does_not_start(
    tmp_path: Path, target: str
) -> None:
    log = tmp_path / f"{target}.log"
    env = {
        **{name.upper(): value for name, value in PRODUCTION_STAND_INS.items()},
        "APP_ENV": "production",
        "EVENT_BUS": "pubsub",
    }
    process, url = start(target, env, log)
    process.wait(60)
    output = log.read_text()
    assert process.returncode != 0
    assert not answers(url)
    assert "Booting worker" not in output
    [line] = [line for line in output.splitlines() if "PUSH_AUDIENCE" in line]
    assert "PUSH_SERVICE_ACCOUNT" in line
    assert "missing: PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT (APP_ENV=production" in line
    assert f"the {target} push target" in line


@pytest.mark.parametrize("target", ["api", "access", "emails"])
def test_production_start_up_names_every_missing_secret(tmp_path: Path, target: str) -> None:
    # The app is built lazily, but the settings are read at start-up: nothing is ever served.
    log = tmp_path / f"{target}.log"
    process, url = start(target, {"APP_ENV": "production", "EVENT_BUS": "pubsub"}, log)
    process.wait(60)
    output = log.read_text()
    assert process.returncode != 0
    assert not answers(url)
    assert "Booting worker" not in output
    assert "refusing to start: missing: DATABASE_URL (APP_ENV=production" in output
    for name in PRODUCTION_REQUIRED_BY_TARGET[target]:
        assert name.upper() in output


def test_an_unknown_target_is_refused(tmp_path: Path) -> None:
    process, _ = start("billing", {}, tmp_path / "billing.log")
    process.wait(30)
    output = (tmp_path / "billing.log").read_text()
    assert process.returncode != 0
    assert "FUNCTION_TARGET must be one of api, access, emails, not 'billing'" in output
