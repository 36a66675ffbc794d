"""Every link an e-mail carries to the site resolves under `make run`: each kind rendered by the
running server (its sample, about the synced catalogue's product, as the test-mail route sends
it) lands in the outbox, and every link in it on SITE_URL answers 200 with a page of web/."""

from __future__ import annotations

import email
import email.policy
import http.client
import re
from email.message import EmailMessage
from urllib.parse import urlsplit

import requests

from emails.kinds import KINDS
from tests.helpers import HANG_GUARD
from tests.web.conftest import Site


def links(message: EmailMessage) -> set[str]:
    found: set[str] = set()
    for part in message.walk():
        if part.get_content_type() in ("text/html", "text/plain"):
            body = part.get_content()
            found |= set(re.findall(r"""https?://[^\s"'<>)\]]+""", body))
    return {link.replace("&amp;", "&").rstrip(".,") for link in found}


def test_every_link_of_every_email_kind_answers_with_a_page(site: Site) -> None:
    sent = requests.get(f"{site.url}/api/test-email", params={"type": "all"}, timeout=HANG_GUARD)
    assert sent.status_code == 200, sent.text
    assert {r["type"] for r in sent.json()["results"] if r["status"] == "sent"} == set(KINDS)
    messages = [
        email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        for path in sorted(site.outbox.glob("*.eml"))
    ]
    assert len(messages) == len(KINDS)
    on_site = {
        link
        for message in messages
        for link in links(message)
        if link.startswith(site.url + "/") or link == site.url
    }
    # The pages the e-mails promise: the dashboard, sign-in, an invitation's accept page...
    paths = {urlsplit(link).path for link in on_site}
    assert {"/dashboard", "/signin", "/invitations/accept"} <= paths, paths
    for link in sorted(on_site):
        answer = requests.get(link, timeout=HANG_GUARD)
        assert answer.status_code == 200, link
        assert answer.headers["Content-Type"].startswith("text/html"), link
        assert '<main id="main"' in answer.text, link


def test_the_api_stays_the_api_and_a_missing_page_is_a_404_page(site: Site) -> None:
    # The banner names the page to open.
    assert f"Pages      {site.url}/ (the reference frontend" in site.process.output()
    health = requests.get(f"{site.url}/api/health", timeout=HANG_GUARD)
    assert health.json() == {"status": "ok"}
    missing = requests.get(f"{site.url}/no/such/page", timeout=HANG_GUARD)
    assert missing.status_code == 404
    assert "Page not found" in missing.text
    unknown_api = requests.get(f"{site.url}/api/no-such-route", timeout=HANG_GUARD)
    assert unknown_api.status_code == 404
    assert "error" in unknown_api.json()


def test_the_development_config_names_this_stack_and_files_outside_web_are_not_served(
    site: Site,
) -> None:
    config = requests.get(f"{site.url}/config.js", timeout=HANG_GUARD)
    assert config.headers["Content-Type"].startswith("text/javascript")
    assert '"apiBase": ""' in config.text
    module = requests.get(f"{site.url}/js/api.js", timeout=HANG_GUARD)
    assert module.headers["Content-Type"].startswith("text/javascript")
    host = urlsplit(site.url)
    for path in ("/../pyproject.toml", "/%2e%2e/pyproject.toml", "/..%2fpyproject.toml"):
        conn = http.client.HTTPConnection(host.hostname or "", host.port, timeout=HANG_GUARD)
        conn.request("GET", path)
        answer = conn.getresponse()
        assert answer.status == 404, path
        assert b"[project]" not in answer.read()
