"""`make run` (dev/server.py): the whole pipeline locally, and nothing left running after."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import requests

from adapters.db.pool import Database
from config import DEV_WEBHOOK_SECRET
from dev import auth_stand_in, pubsub_emulator, stripe_stand_in
from dev.samples import catalogue
from dev.samples.catalogue import seed_demo_products
from tests.adapters.bus.test_pubsub import (  # fixtures: pytest finds them by name
    completed,
    emulator_processes,
    has_access,
)
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for
from tests.pubsub_fixtures import (  # noqa: F401
    access_target_fixture,
    api_server_fixture,
    post_event,
    pubsub_fixture,
    service_env_fixture,
    spawn,
)


@pytest.fixture
def shopper(db: Database) -> str:
    seed_demo_products(db)
    return create_user(db, "dev-server@example.com")


def test_make_run_with_pubsub_serves_the_whole_pipeline_and_stops_the_emulator(
    service_env: dict[str, str], db: Database, shopper: str, tmp_path: Path
) -> None:
    port = pubsub_emulator.free_port()
    env = {k: v for k, v in service_env.items() if k != "PUBSUB_EMULATOR_HOST"}
    env |= {"PORT": str(port), "EVENT_BUS": "pubsub"}
    server = spawn(
        [sys.executable, "-m", "dev.server"], env=env, port=port, log=tmp_path / "dev.log"
    )
    try:
        found = re.search(r"Pub/Sub emulator on 127\.0\.0\.1:(\d+)", server.output())
        assert found, server.output()
        emulator_port = int(found.group(1))
        response = post_event(
            server.url, stripe_event("checkout.session.completed", completed(shopper))
        )
        assert response.status_code == 200
        wait_for(lambda: has_access(db, shopper))
    finally:
        server.stop()  # SIGTERM: the development server stops the emulator it started
    assert server.process.returncode == 0, server.output()[-2000:]
    assert not pubsub_emulator.answers(f"127.0.0.1:{emulator_port}")
    assert emulator_processes(emulator_port) == []


def test_make_run_prints_the_next_steps_and_writes_run_env_for_the_cli(
    database_url: str, tmp_path: Path
) -> None:
    port = pubsub_emulator.free_port()
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {"PORT": str(port), "DATABASE_URL": database_url, "DATA_DIR": str(tmp_path / "data")}
    server = spawn(
        [sys.executable, "-m", "dev.server"], env=env, port=port, log=tmp_path / "run.log"
    )
    run_env = tmp_path / "data" / "run.env"
    try:
        out = server.output()
        assert f"Database   {database_url}" in out
        webhook = f"http://localhost:{port}/api/webhook/payments, secret {DEV_WEBHOOK_SECRET}"
        assert f"Webhook    {webhook}" in out
        assert "Outbox     " in out
        assert f"source {run_env}" in out
        assert "flask --app main users token ada@example.com" in out
        exported = dict(
            line.removeprefix("export ").split("=", 1)
            for line in run_env.read_text().splitlines()
            if line.startswith("export ")
        )
        [url] = shlex.split(exported["DATABASE_URL"])
        assert url == database_url
        with psycopg.connect(url) as conn:
            # The demo catalogue, synced from the Stripe stand-in.
            rows = conn.execute(
                "select stripe_price_id from public.products where is_active"
                " and stripe_product_id like 'prod_demo_%'"
            ).fetchall()
            assert {r[0] for r in rows} == {p["id"] for p in catalogue.PRICES}
        # The CLI in another terminal reaches the same stand-in.
        assert exported["STRIPE_SECRET_KEY"] == stripe_stand_in.API_KEY
        cli_env = {**env, **{k: shlex.split(v)[0] for k, v in exported.items()}}
        synced = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "main", "products", "sync"],
            env=cli_env, capture_output=True, text=True, timeout=HANG_GUARD, check=False,
        )  # fmt: skip
        assert "catalogue synced from Stripe: 3 price(s)" in synced.stdout, synced.stderr
    finally:
        server.stop()
    assert server.process.returncode == 0, server.output()[-2000:]
    assert not run_env.exists()


def test_make_run_serves_supabase_auth_beside_the_api(database_url: str, tmp_path: Path) -> None:
    port = pubsub_emulator.free_port()
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {"PORT": str(port), "DATABASE_URL": database_url, "DATA_DIR": str(tmp_path / "data")}
    server = spawn(
        [sys.executable, "-m", "dev.server"], env=env, port=port, log=tmp_path / "auth.log"
    )
    site = f"http://localhost:{port}"
    try:
        out = server.output()
        assert f"Auth       {site}/auth/v1" in out
        assert (
            f"SUPABASE_URL={site} SUPABASE_PUBLISHABLE_KEY={auth_stand_in.PUBLISHABLE_KEY}" in out
        )
        # A page of the site signs up, as supabase-js does, and calls the API with the token.
        signed_up = requests.post(
            f"{server.url}/auth/v1/signup",
            json={"email": "page@example.com", "password": "long enough"},
            headers={"apikey": auth_stand_in.PUBLISHABLE_KEY, "Origin": site},
            timeout=HANG_GUARD,
        )
        assert signed_up.status_code == 200, signed_up.text
        assert signed_up.headers["Access-Control-Allow-Origin"] == site
        token = signed_up.json()["access_token"]
        me = requests.get(
            f"{server.url}/api/me", headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD
        )
        assert me.status_code == 200, me.text
        # `users token`, with run.env's settings, signs tokens the same API accepts.
        exported = dict(
            line.removeprefix("export ").split("=", 1)
            for line in (tmp_path / "data" / "run.env").read_text().splitlines()
            if line.startswith("export ")
        )
        assert shlex.split(exported["SUPABASE_URL"]) == [site]
        cli_env = {**env, **{k: shlex.split(v)[0] for k, v in exported.items()}}
        printed = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "main", "users", "token", "page@example.com"],
            env=cli_env, capture_output=True, text=True, timeout=HANG_GUARD, check=True,
        )  # fmt: skip
        cli = requests.get(
            f"{server.url}/api/me",
            headers={"Authorization": f"Bearer {printed.stdout.strip()}"},
            timeout=HANG_GUARD,
        )
        assert cli.status_code == 200, cli.text
    finally:
        server.stop()
    assert server.process.returncode == 0, server.output()[-2000:]
