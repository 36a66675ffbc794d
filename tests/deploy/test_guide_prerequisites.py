"""What docs/deploy/ asks for before anything is deployed, held to the code: the frontend's
pages in the box at its top are those the e-mails link to, the checklist enables the access
token hook the migrations define, and it installs every gcloud release level the guide and the
monitoring script use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from emails.props import DEFAULT_PATHS
from tests.deploy.guide import guide_text
from tests.deploy.test_guide import _checklist_item, _section

ROOT = Path(__file__).resolve().parents[2]
# The links the mails build beside DEFAULT_PATHS, each in the one place that builds it.
BUILT_LINKS = {
    "/#pricing": ROOT / "emails" / "kinds" / "checkout_expired.py",
    "/invitations/accept": ROOT / "teams" / "service.py",
}


@pytest.fixture(scope="module")
def guide() -> str:
    return guide_text()


def _box(guide: str) -> str:
    """The blockquote between the introduction and the checklist."""
    head = guide[: guide.index("\n## Checklist\n")]
    return "\n".join(line for line in head.splitlines() if line.startswith(">"))


def test_the_box_names_every_page_the_mails_link_to(guide: str) -> None:
    for path, source in BUILT_LINKS.items():
        assert path in source.read_text(), f"{source} no longer builds {path}"
    mailed = set(DEFAULT_PATHS.values()) | set(BUILT_LINKS)
    box = _box(guide)
    assert box, "no box above the checklist"
    pages = set(re.findall(r"^> \| `(/[^`]*)`", box, re.M))
    assert mailed <= pages, f"missing pages: {sorted(mailed - pages)}"


def test_the_box_names_the_calls_a_first_sale_needs(guide: str) -> None:
    box = _box(guide)
    for route in (
        "GET /api/auth/callback",
        "GET /api/products/public",
        "POST /api/payments/create-checkout",
        "POST /api/payments/complete-checkout",
        "GET /api/me",
        "POST /api/payments/create-portal",
        "POST /api/invitations/accept",
    ):
        assert route in box, route


def test_the_checklist_enables_the_hook_the_migrations_define(guide: str) -> None:
    item = _checklist_item(_section(guide, "Checklist"), "Custom Access")
    [function] = re.findall(r"`public\.(\w+)`", item)
    migrations = "".join(p.read_text() for p in (ROOT / "supabase" / "migrations").glob("*.sql"))
    assert f"create or replace function public.{function}(event jsonb) returns jsonb" in migrations
    # Step 3 says where, and with the CLI's config the same.
    step = _section(guide, "3. Supabase")
    assert f'uri = "pg-functions://postgres/public/{function}"' in step


def test_the_checklist_installs_every_gcloud_release_level_used(guide: str) -> None:
    used = set(re.findall(r"gcloud (alpha|beta) ", guide))
    used |= set(re.findall(r"gcloud (alpha|beta) ", (ROOT / "ops/monitoring/apply.sh").read_text()))
    assert used == {"alpha", "beta"}
    item = _checklist_item(_section(guide, "Checklist"), "gcloud auth login")
    installed = set(re.findall(r"`gcloud components install (\w+)`", item))
    installed |= set(re.findall(r"`(alpha)` too", item))
    assert installed == used
    assert "gcloud components install beta" in _section(guide, "1. Google Cloud (once)")
