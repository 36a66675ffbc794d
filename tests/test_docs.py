"""The README and docs/ point only at what exists: every relative link resolves, and every
file path they name in backquotes is a file or folder of this checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "deploy").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# A path in backquotes: folders and a file with one of the project's own endings.
# Files of the founder's own that the docs tell them to edit: `supabase init` makes this one.
THEIRS = {"supabase/config.toml"}
NAMED_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|sql|md|yaml|toml|sh|html|txt|lua))`")


def _relative_links(page: Path) -> list[str]:
    return [
        t for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("mailto:")
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    missing = [t for t in _relative_links(page) if not (page.parent / t).exists()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_page_names_exists(page: Path) -> None:
    named = set(NAMED_PATH.findall(page.read_text()))
    # `<kind>` and the like stand for a name the reader picks.
    missing = sorted(p for p in named - THEIRS if "<" not in p and not (ROOT / p).exists())
    assert missing == []


# A route of this API as the pages write it: `POST /api/teams/{teamId}/invitations` (a query
# left off); other services' routes (GitHub's, Stripe's) have other prefixes.
NAMED_ROUTE = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (/api/[\w/{}.-]*)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_route_a_page_names_is_served(page: Path) -> None:
    from config import Settings
    from main import create_app
    from runtime.openapi import operations

    # The OpenAPI document's own route is not one of its operations; the founder's example in
    # features.md is built by tests/access/test_features_example.py.
    app = create_app(Settings(enable_test_email=True, app_env="development"))
    served = {(method.upper(), path) for method, path, _ in operations(app)}
    served |= {("GET", "/api/openapi.json"), ("GET", "/api/reports")}
    named = set(NAMED_ROUTE.findall(page.read_text()))
    assert sorted(named - served) == []


# A count in prose of what grows with the project: "1,315 tests", "nine kinds", "twelve files".
# It goes stale at the next addition, so the docs say what a thing is, and the code lists them.
NUMBER = (
    r"\d[\d,]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    r"|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty"
)
STALE_COUNT = re.compile(
    rf"\b(?:{NUMBER})\s+(?:(?!the\b|of\b)[\w-]+\s+)?"
    r"(?:tests|kinds|test files|transactional e-mails|modules|migrations|routes)\b",
    re.IGNORECASE,
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_counts_what_grows(page: Path) -> None:
    assert STALE_COUNT.findall(" ".join(page.read_text().split())) == []


def test_a_count_of_what_grows_is_caught() -> None:
    caught = [
        "about 4 minutes for the 1,315 tests on two cores",
        "Nine kinds, each one module",
        "fourteen transactional e-mails sent through Resend",
        "the twelve routes",
    ]
    assert all(STALE_COUNT.search(text) for text in caught)
    assert not STALE_COUNT.search("one the tests start")
