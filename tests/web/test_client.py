"""The frontend's client is the app's OpenAPI document, generated (dev/web_client.py): a route
whose shape changed without regenerating it fails here; and the frontend loads nothing from
another host (no CDN, font or tracker)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from dev import web_client

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
# The pages the journeys photograph (`make web-screenshots`), as the README and docs show them.
SCREENSHOTS = (
    "landing", "signin", "dashboard", "products", "success", "success-guest", "team",
    "team-seats", "accept",
)  # fmt: skip


def test_the_client_is_the_apps_openapi_document_generated() -> None:
    generated = web_client.generate(web_client.app_document())
    assert generated == web_client.OUT.read_text(), (
        "web/js/api.js differs from GET /api/openapi.json: run `uv run python -m dev.web_client`"
    )


def test_a_changed_answer_or_a_new_route_changes_the_client() -> None:
    document = web_client.app_document()
    changed = copy.deepcopy(document)
    changed["components"]["schemas"]["PublicProduct"]["properties"]["shade"] = {"type": "string"}
    changed["paths"]["/api/things"] = {
        "get": {"summary": "Things", "responses": {"200": {"description": "200"}}}
    }
    before, after = web_client.generate(document), web_client.generate(changed)
    assert "shade?: string" in after
    assert "shade" not in before
    assert "export function getThings()" in after


def test_each_route_has_a_name_of_its_own() -> None:
    # A module exporting one name twice does not load: every page would stay on "Loading…".
    exported = re.findall(r"export function (\w+)", web_client.OUT.read_text())
    assert len(exported) == len(set(exported))
    assert "export function getAdminCustomersByUserId(userId)" in web_client.OUT.read_text()
    document = web_client.app_document()
    twice = copy.deepcopy(document)
    twice["paths"]["/api/things/{thingId}/x"] = {"get": {"responses": {}}}
    twice["paths"]["/api/things/x/{thingId}"] = {"get": {"responses": {}}}
    twice["paths"]["/api/{thingId}/things/x"] = {"get": {"responses": {}}}
    with pytest.raises(ValueError, match="getThingsXByThingId"):
        web_client.generate(twice)


def test_every_route_a_page_calls_is_in_the_client() -> None:
    exported = set(re.findall(r"export function (\w+)", web_client.OUT.read_text()))
    imported = {
        name.strip()
        for page in (WEB / "js").rglob("*.js")
        for group in re.findall(r'import \{([^}]*)\} from "\.\.?/api\.js"', page.read_text())
        for name in group.split(",")
        if name.strip()
    }
    assert imported, "the pages call the API through the generated client"
    assert imported <= exported, imported - exported


def test_the_frontend_loads_nothing_from_another_host() -> None:
    remote = re.compile(
        r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|from\s+["'](?:https?:)?//|"""
        r"""import\(\s*["'](?:https?:)?//|url\(\s*["']?(?:https?:)?//|@import"""
    )
    for path in WEB.rglob("*"):
        if path.suffix in (".html", ".js", ".css"):
            found = remote.search(path.read_text())
            assert found is None, f"{path.relative_to(WEB)} loads {found.group(0)!r}"


def test_each_page_has_its_screenshot_in_docs_web() -> None:
    missing = [n for n in SCREENSHOTS if not (ROOT / "docs" / "web" / f"{n}.png").is_file()]
    assert missing == [], "run `make web-screenshots`"


def test_no_page_writes_markup_from_a_string() -> None:
    """What the API answers and people typed goes in as text (ui.js's `h`), never parsed."""
    sink = re.compile(r"\.(?:innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|eval\(")
    for path in (WEB / "js").rglob("*.js"):
        found = sink.search(path.read_text())
        assert found is None, f"{path.relative_to(WEB)}: {found.group(0)!r}"
