"""The same files work on another origin than the API's: web/ served from its own host with a
`config.js` naming the API elsewhere, as docs/deploy/'s second way deploys it. The API allows
that origin (CORS_ORIGINS, with credentials) and builds its links on it (SITE_URL); the pages
read the catalogue, sign up, load the dashboard and complete a checkout across origins."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect
from werkzeug.serving import make_server
from werkzeug.wrappers import Response

from config import Settings
from dev import auth_stand_in, pubsub_emulator, web
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD
from tests.pubsub_fixtures import spawn

expect.set_options(timeout=HANG_GUARD * 1000)


@pytest.fixture(scope="module")
def origins(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(the frontend's origin, the API's): web/ on 127.0.0.1, the API on localhost."""
    scratch = tmp_path_factory.mktemp("cross")
    api_port, front_port = pubsub_emulator.free_port(), pubsub_emulator.free_port()
    front, api = f"http://127.0.0.1:{front_port}", f"http://localhost:{api_port}"
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {
        "PORT": str(api_port),
        "DATABASE_URL": database_url,
        "DATA_DIR": str(scratch / "data"),
        "EMAIL_OUTBOX_DIR": str(scratch / "outbox"),
        "SITE_URL": front,
        "CORS_ORIGINS": front,
    }
    server = spawn(
        [sys.executable, "-m", "dev.server"], env=env, port=api_port, log=scratch / "log"
    )
    # The frontend's host knows nothing of the API: every path not in web/ is its 404 page.
    settings = Settings(
        supabase_url=api,  # type: ignore[arg-type]  # pydantic parses the URL
        supabase_publishable_key=auth_stand_in.PUBLISHABLE_KEY,  # type: ignore[arg-type]
    )
    config = web.config_js(settings, api_base=api)
    static = web.web_app(Response("not here", status=404), config)
    host = make_server("127.0.0.1", front_port, static, threaded=True)
    thread = threading.Thread(target=host.serve_forever, daemon=True)
    thread.start()
    try:
        yield front, api
    finally:
        host.shutdown()
        thread.join(5)
        server.stop()


def test_the_same_pages_on_another_origin_sign_up_and_buy_through_cors(
    browser: Browser, origins: tuple[str, str]
) -> None:
    front, api = origins
    context = browser.new_context(base_url=front)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD * 1000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        calls: list[str] = []
        page.on("request", lambda request: calls.append(request.url))
        page.goto("/")
        expect(page.locator("article.plan h3").first).to_have_text("Pro Repository")

        page.goto("/signin")
        email = "far-away@example.com"
        page.get_by_label("E-mail", exact=True).nth(1).fill(email)
        page.get_by_label("Password", exact=True).fill("correct horse battery")
        page.get_by_role("button", name="Create an account").click()
        page.wait_for_url(f"{front}/dashboard")
        expect(page.locator("#access-state")).to_have_text(re.compile("no access yet"))

        page.goto("/")
        page.get_by_role("button", name="Buy Starter Kit").click()
        page.wait_for_url(re.compile(r".*/pay/cs_\w+"))
        page.get_by_role("button", name=re.compile("^Pay")).click()
        page.get_by_role("link", name="Back to the site").click()
        page.wait_for_url(re.compile(re.escape(front) + r"/success\?session_id=cs_\w+"))
        expect(page.locator("#access-state")).to_have_text("Paid: you have access now.")
        # Every API call went to the API's origin, none to the frontend's host.
        assert any(c.startswith(f"{api}/api/me") for c in calls)
        assert any(c.startswith(f"{api}/api/payments/complete-checkout") for c in calls)
        assert not [c for c in calls if c.startswith(f"{front}/api/")]
        assert errors == []
    finally:
        with contextlib.suppress(Exception):
            context.close()
