"""`make run`'s stack (`python -m dev.server`) in a process of its own, on free ports, for the
frontend's tests: the API, web/ on the same origin (SITE_URL's local default), the Stripe and
Supabase Auth stand-ins, the outbox; GitHub faked at its HTTP boundary. And the machine's
Chromium, driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import email
import email.policy
import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from dev import pubsub_emulator
from dev.processes import Target
from tests.conftest import SETTINGS_VARIABLES, serving
from tests.fakes.github import FakeGitHub
from tests.helpers import wait_for
from tests.pubsub_fixtures import spawn

USAGE_KEY = "web-tests-usage-key-0123456789abcdef"
RETENTION_COUPON = "stay_with_us"


@dataclass(frozen=True)
class Site:
    process: Target
    # http://localhost:<port>: SITE_URL's local default, the origin every e-mail links to.
    url: str
    outbox: Path
    data: Path
    github: FakeGitHub

    def mails(self, to: str) -> list[email.message.EmailMessage]:
        """The outbox's messages to `to`, oldest first."""
        found: list[email.message.EmailMessage] = []
        for path in sorted(self.outbox.glob("*.eml"), key=lambda p: p.stat().st_mtime_ns):
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            if to.lower() in str(message["To"]).lower():
                found.append(message)
        return found

    def link(self, to: str, pattern: str) -> str:
        """The first link matching `pattern` in the newest mail to `to` that has one, waiting
        for the mail (the subscribers send it after the request that caused it)."""
        found: str = wait_for(lambda: self._link(to, pattern))
        return found

    def _link(self, to: str, pattern: str) -> str | None:
        for message in reversed(self.mails(to)):
            text = message.get_body(("plain",))
            found = re.search(pattern, text.get_content()) if text else None
            if found:
                return found.group(0).replace("&amp;", "&")
        return None


@pytest.fixture(scope="module")
def github_fake() -> Iterator[FakeGitHub]:
    """GitHub's API, faked at its HTTP boundary, for the whole module's server."""
    yield from serving(FakeGitHub())


@pytest.fixture(scope="module")
def site(
    database_url: str, github_fake: FakeGitHub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    github = github_fake
    scratch = tmp_path_factory.mktemp("site")
    port = pubsub_emulator.free_port()
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {
        "PORT": str(port),
        "DATABASE_URL": database_url,
        "DATA_DIR": str(scratch / "data"),
        "EMAIL_OUTBOX_DIR": str(scratch / "outbox"),
        "GITHUB_TOKEN": "ghp_test_fake",
        "GITHUB_API_URL": github.server.url,
        # The founder's other services consume credits with it (POST /api/usage).
        "USAGE_API_KEY": USAGE_KEY,
        # A cancellation first offers it (the stand-in holds the coupon it names).
        "RETENTION_COUPON": RETENTION_COUPON,
    }
    server = spawn([sys.executable, "-m", "dev.server"], env=env, port=port, log=scratch / "log")
    try:
        yield Site(server, f"http://localhost:{port}", scratch / "outbox", scratch / "data", github)
    finally:
        server.stop()


def chromium() -> str:
    """The machine's Chromium (`make test` installs it); under CI its absence fails."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (`make test` installs it from Debian)"
        if os.environ.get("CI", "").lower() in {"1", "true"}:
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()
