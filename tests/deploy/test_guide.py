"""docs/deploy/'s checklist names what the code declares, so the guide cannot drift from it.

The Stripe webhook's event types come from core/events.py, the secrets from the settings
(config/), the required build substitutions from cloudbuild.yaml's own check, and the frontend
pages from the paths the e-mails link to (emails/props.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalogue.rules import METADATA
from config import PRODUCTION_OPTIONAL, PRODUCTION_REQUIRED
from core.events import SUBSCRIBED_TYPES
from emails.props import DEFAULT_PATHS
from tests.deploy.guide import guide_text

ROOT = Path(__file__).resolve().parents[2]
# A Stripe event type as written in the guide: `checkout.session.completed`.
_EVENT_TYPE = re.compile(r"`([a-z_]+(?:\.[a-z_]+)+)`")


def _section(text: str, heading: str) -> str:
    """The body of the `## heading` section, up to the next `## `."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _checklist_item(checklist: str, marker: str) -> str:
    """The checklist item (its first line and continuation lines) that mentions `marker`."""
    items = re.split(r"\n(?=- \[ \] |\n)", checklist)
    found = [item for item in items if marker in item]
    assert len(found) == 1, f"expected one checklist item mentioning {marker!r}, found {found}"
    return found[0]


@pytest.fixture(scope="module")
def guide() -> str:
    return guide_text()


@pytest.fixture(scope="module")
def checklist(guide: str) -> str:
    return _section(guide, "Checklist")


def test_the_checklist_comes_first(guide: str) -> None:
    headings = re.findall(r"^## (.+)$", guide, re.M)
    assert headings[0] == "Checklist"


def test_the_checklists_webhook_events_are_the_subscribed_types(checklist: str) -> None:
    item = _checklist_item(checklist, "/api/webhook/payments")
    named = _EVENT_TYPE.findall(item)
    assert len(named) == len(set(named)), f"an event type is listed twice: {sorted(named)}"
    assert set(named) == SUBSCRIBED_TYPES, (
        f"missing {sorted(SUBSCRIBED_TYPES - set(named))}, "
        f"not subscribed {sorted(set(named) - SUBSCRIBED_TYPES)}"
    )


def test_the_endpoint_command_enables_the_subscribed_types(guide: str) -> None:
    enabled = re.findall(r'"enabled_events\[\]=([a-z_.]+)"', _section(guide, "4. Stripe"))
    assert len(enabled) == len(set(enabled))
    assert set(enabled) == SUBSCRIBED_TYPES


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    return loaded


def test_the_checklist_names_every_secret(checklist: str, config: dict[str, Any]) -> None:
    # A setting production needs that the build does not take as a substitution is a secret.
    substituted = {name.removeprefix("_") for name in config["substitutions"]}
    settings = {name.upper() for name in (*PRODUCTION_REQUIRED, *PRODUCTION_OPTIONAL)}
    item = _checklist_item(checklist, "Secret Manager:")
    assert set(re.findall(r"`([A-Z][A-Z0-9_]+)`", item)) == settings - substituted


def test_the_checklist_names_every_required_substitution(
    checklist: str, config: dict[str, Any]
) -> None:
    check = next(step for step in config["steps"] if step["id"] == "check-substitutions")
    loop = re.search(r"for name in ([A-Z_ \\\n]+?); do", check["args"][1])
    assert loop is not None, "the check-substitutions step no longer lists its names"
    required = {f"_{name}" for name in loop[1].replace("\\", " ").split()}
    item = _checklist_item(checklist, "The first build")
    assert required <= set(re.findall(r"`(_[A-Z_]+)`", item))


def test_the_frontend_pages_are_those_the_mails_link_to(guide: str, checklist: str) -> None:
    table = _section(guide, "9. The frontend")
    pages = set(re.findall(r"^\| `(/[^`]*)` \|", table, re.M))
    assert set(DEFAULT_PATHS.values()) <= pages
    item = _checklist_item(checklist, "pages the mails link to")
    assert set(DEFAULT_PATHS.values()) <= set(re.findall(r"`(/[^`]*)`", item))


def test_the_catalogues_metadata_table_is_the_one_the_code_reads(
    guide: str, checklist: str
) -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \|", _section(guide, "8. The catalogue"), re.M)
    assert rows == list(METADATA)
    item = _checklist_item(checklist, "product metadata")
    assert set(re.findall(r"`([a-z_]+)`", item)) >= set(METADATA)
