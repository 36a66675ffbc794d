"""The registry of e-mail kinds is whole: adding a kind is its module in core/email/kinds/ and
its two templates, and each kind carries everything the rest of the house reads from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.app_events import APP_EVENTS
from core.email.kind import Senders
from core.email.kinds import KINDS, REGISTRY, UnknownEmailKind, kind_of
from core.email.plan import handled_types
from core.email.render import TEMPLATE_DIR, Brand, render
from core.events import SUBSCRIBED_TYPES

BRAND = Brand(product_name="Acme", site_url="https://acme.example.com", support_email="a@b.co")


def test_every_kind_has_both_templates_and_every_template_a_kind() -> None:
    templates = {p.name for p in TEMPLATE_DIR.iterdir() if not p.name.startswith("_")}
    assert templates == {f"{kind}{suffix}" for kind in KINDS for suffix in (".html", ".txt")}


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_has_a_sample_that_renders_with_a_subject(name: str) -> None:
    kind = REGISTRY[name]
    props = kind.sample_props()
    assert isinstance(props, kind.props)
    content = render(name, props, brand=BRAND)
    assert 0 < len(content.subject) <= kind.subject_limit
    assert content.subject == kind.subject(props, BRAND)
    assert content.html.strip()
    assert content.text.strip()


def test_kinds_are_triggered_only_by_events_that_reach_the_bus() -> None:
    triggers = {t for kind in REGISTRY.values() for t in kind.triggers}
    assert triggers == handled_types()
    assert triggers <= SUBSCRIBED_TYPES | APP_EVENTS
    assert triggers & APP_EVENTS, "the mails that speak of access wait for what was committed"


def test_only_account_mails_come_from_no_reply() -> None:
    senders = Senders(team="Team <team@x.example>", noreply="No reply <noreply@x.example>")
    noreply = {name for name, kind in REGISTRY.items() if kind.sender == "noreply"}
    assert noreply == {"signin-link"}
    assert senders.of(kind_of("signin-link")) == "No reply <noreply@x.example>"
    assert senders.of(kind_of("invoice-paid")) == "Team <team@x.example>"


def test_each_module_is_named_after_its_kind() -> None:
    modules = Path(__file__).resolve().parents[3] / "core" / "email" / "kinds"
    names = {p.stem for p in modules.glob("*.py") if p.stem != "__init__"}
    assert names == {kind.replace("-", "_") for kind in KINDS}


def test_an_unknown_kind_is_named_with_the_known_ones() -> None:
    with pytest.raises(UnknownEmailKind, match=r"receipt.*purchase-confirmation"):
        kind_of("receipt")
