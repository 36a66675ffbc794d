"""A founder's walk under `make run` (`python -m dev.server`), the Stripe stand-in standing in for
Stripe: a signed-in checkout made through the API and paid on the stand-in's page is completed
from the success page with the session id the page's link back carries; a team's checkout of 3
seats paid there gives the team 3 seats, and 2 seats asked through the API take the newest
member's from the period's end; a product made in the stand-in is still sold after the server
restarts."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from email import policy
from email.parser import BytesParser
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import html5lib
import pytest
import requests
from pydantic import AnyHttpUrl, SecretStr

from adapters.db.pool import Database
from config import Settings
from dev import local_users, pubsub_emulator
from tests.conftest import SETTINGS_VARIABLES
from tests.dev.test_stand_in_checkout import NS, form_of
from tests.helpers import HANG_GUARD, create_user, wait_for
from tests.pubsub_fixtures import Service, spawn

TEAM_PRICE = "price_demo_team_monthly"  # per seat, as the demo catalogue's metadata says


@dataclass
class Local:
    """`make run` as a founder starts it, on this test's database and data directory."""

    database_url: str
    data: Path
    log: Path
    db: Database
    port: int = 0
    server: Service | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = pubsub_emulator.free_port()
        env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
        env |= {"PORT": str(self.port), "DATABASE_URL": self.database_url}
        env |= {"DATA_DIR": str(self.data), "EMAIL_OUTBOX_DIR": str(self.data / "outbox")}
        command = [sys.executable, "-m", "dev.server"]
        self.server = spawn(command, env=env, port=self.port, log=self.log)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            assert self.server.process.returncode == 0, self.server.output()[-2000:]
            self.server = None

    def exported(self) -> dict[str, str]:
        """What `.data/run.env` exports for the CLI."""
        return {
            name: value.strip("'")
            for name, value in (
                line.removeprefix("export ").split("=", 1)
                for line in (self.data / "run.env").read_text().splitlines()
                if line.startswith("export ")
            )
        }

    @property
    def stripe(self) -> str:
        """The stand-in's address, as `.data/run.env` exports it for the CLI."""
        return self.exported()["STRIPE_API_BASE"]

    def token(self, email: str) -> str:
        """`users token` after `source .data/run.env`: signed for the Auth stand-in."""
        exported = self.exported()
        settings = Settings(
            database_url=SecretStr(self.database_url),
            data_dir=self.data,
            supabase_url=AnyHttpUrl(exported["SUPABASE_URL"]),
            supabase_jwt_secret=SecretStr(exported["SUPABASE_JWT_SECRET"]),
        )
        return local_users.token(email=email, ttl=600, db=self.db, settings=settings)

    def call(self, method: str, path: str, email: str, body: Any = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token(email)}"}
        return requests.request(
            method, self.url + path, json=body, headers=headers, timeout=HANG_GUARD
        )


@pytest.fixture
def local(database_url: str, db: Database, tmp_path: Path) -> Iterator[Local]:
    found = Local(database_url, tmp_path / "data", tmp_path / "run.log", db)
    found.start()
    try:
        yield found
    finally:
        found.stop()


def pay(page: str) -> str:
    """Press Pay on the stand-in's checkout page; the link back to the site it then shows."""
    method, action, fields = form_of(requests.get(page, timeout=HANG_GUARD).text)
    assert method == "post"
    paid = requests.post(page.split("/pay/")[0] + action, data=fields, timeout=HANG_GUARD)
    assert paid.status_code == 200, paid.text
    [back] = html5lib.parse(paid.text).findall(".//h:a[@id='back']", NS)
    return str(back.get("href"))


def checkout(local: Local, email: str, **extra: Any) -> str:
    body = {
        "priceId": "price_demo_pro_github",
        "mode": "payment",
        "successUrl": local.url + "/welcome",
        "cancelUrl": local.url + "/pricing",
        **extra,
    }
    answer = local.call("POST", "/api/payments/create-checkout", email, body)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["url"])


def test_a_checkout_paid_on_the_page_is_completed_from_the_success_page(
    local: Local, db: Database
) -> None:
    create_user(db, "ada@example.com")
    page = checkout(local, "ada@example.com")
    session = page.rsplit("/", 1)[-1]

    # Not paid yet: the success page is told to wait.
    early = local.call(
        "POST", "/api/payments/complete-checkout", "ada@example.com", {"sessionId": session}
    )
    assert early.status_code == 409, early.text

    back = pay(page)
    [carried] = parse_qs(urlsplit(back).query)["session_id"]
    assert carried == session
    done = local.call(
        "POST", "/api/payments/complete-checkout", "ada@example.com", {"sessionId": carried}
    )
    assert done.status_code == 200, done.text
    assert done.json()["hasAccess"] is True


def test_a_team_buys_3_seats_on_the_page_and_gives_one_back(local: Local, db: Database) -> None:
    people = ["ada", "grace", "alan"]
    for name in people:
        create_user(db, f"{name}@example.com")
    owner = "ada@example.com"
    products = requests.get(local.url + "/api/products/public", timeout=HANG_GUARD).json()[
        "products"
    ]
    assert [p["priceId"] for p in products if p["perSeat"]] == [TEAM_PRICE]
    team = local.call("POST", "/api/teams", owner, {"name": "Initech"}).json()["id"]
    page = checkout(local, owner, priceId=TEAM_PRICE, mode="subscription", teamId=team, quantity=3)
    pay(page)
    seats = wait_for(
        # Until the checkout applies, the team has no per-seat plan: `seats` is null (no limit).
        lambda: (
            (local.call("GET", f"/api/teams/{team}", owner).json()["seats"] or {}).get("total") == 3
        ),
    )
    assert seats
    # Nobody's personal account holds it: the team's does.
    assert local.call("GET", "/api/me", owner).json()["hasAccess"] is True
    personal = db.fetch_all(
        "select e.kind from public.entitlements e join public.accounts a on a.id = e.account_id"
        " where a.kind = 'personal'"
    )
    assert personal == []

    for name in people[1:]:  # grace, then alan: the newest
        email = f"{name}@example.com"
        invited = local.call(
            "POST", f"/api/teams/{team}/invitations", owner, {"email": email, "role": "member"}
        )
        assert invited.status_code in (200, 201), invited.text
        token = wait_for(partial(invitation_token, local, email))
        accepted = local.call("POST", "/api/invitations/accept", email, {"token": token})
        assert accepted.status_code == 200, accepted.text
        assert local.call("GET", "/api/me", email).json()["hasAccess"] is True

    lowered = local.call("PATCH", f"/api/teams/{team}/seats", owner, {"quantity": 2})

    # Fewer seats wait for the period's end; then the newest member's seat goes.
    assert lowered.status_code == 200, lowered.text
    assert lowered.json()["total"] == 3
    assert local.call("GET", "/api/me", "alan@example.com").json()["hasAccess"] is True
    [sub] = db.fetch_all(
        "select e.source_id from public.entitlements e where e.kind = 'subscription'"
    )
    ended = requests.post(f"{local.stripe}/period_end/{sub['source_id']}", timeout=HANG_GUARD)
    assert ended.status_code == 200, ended.text
    assert wait_for(
        lambda: local.call("GET", f"/api/teams/{team}", owner).json()["seats"]["total"] == 2
    )
    assert local.call("GET", "/api/me", "grace@example.com").json()["hasAccess"] is True
    assert local.call("GET", "/api/me", "alan@example.com").json()["hasAccess"] is False


def invitation_token(local: Local, email: str) -> str | None:
    """The token of the invitation mailed to `email`, once it is in the outbox."""
    for path in sorted((local.data / "outbox").glob("*.eml")):
        with path.open("rb") as file:
            message = BytesParser(policy=policy.default).parse(file)
        text = message.get_body(preferencelist=("plain",))
        if message["To"] == email and text is not None:
            found = re.search(r"/invitations/accept\?token=([\w-]+)", str(text.get_content()))
            if found:
                return found.group(1)
    return None


def test_a_product_made_in_the_stand_in_is_sold_after_a_restart(local: Local) -> None:
    stripe = local.stripe
    made = requests.post(
        stripe + "/v1/products",
        data={"name": "Course", "metadata[type]": "link", "metadata[features]": "videos"},
        timeout=HANG_GUARD,
    ).json()
    price = requests.post(
        stripe + "/v1/prices",
        data={"product": made["id"], "unit_amount": 2900, "currency": "usd"},
        timeout=HANG_GUARD,
    ).json()

    local.stop()
    local.start()

    products = requests.get(local.url + "/api/products/public", timeout=HANG_GUARD).json()[
        "products"
    ]
    [course] = [p for p in products if p["priceId"] == price["id"]]
    assert (course["name"], course["price"], course["features"]) == ("Course", 29.0, ["videos"])
