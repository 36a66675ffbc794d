"""The registry of e-mail kinds is whole: adding a kind is its module in emails/kinds/ and
its two templates, and each kind carries everything the rest of the house reads from it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.app_events import APP_EVENTS, TEAM_INVITED, TEAM_SEAT_LOST
from core.events import SUBSCRIBED_TYPES, Event, app_event
from emails.kind import Senders
from emails.kinds import KINDS, REGISTRY, UnknownEmailKind, kind_of
from emails.plan import handled_types
from emails.render import TEMPLATE_DIR, Brand, render

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
    modules = Path(__file__).resolve().parents[2] / "emails" / "kinds"
    names = {p.stem for p in modules.glob("*.py") if p.stem != "__init__"}
    assert names == {kind.replace("-", "_") for kind in KINDS}


def test_an_unknown_kind_is_named_with_the_known_ones() -> None:
    with pytest.raises(UnknownEmailKind, match=r"receipt.*purchase-confirmation"):
        kind_of("receipt")


def _event(event_type: str, obj: dict[str, object]) -> Event:
    return app_event(event_type, event_id="evt_1", obj=obj, created=datetime.now(UTC))[0]


def test_a_team_name_reaches_a_mail_only_beside_who_wrote_it() -> None:
    """Events published before the mails named who wrote a team's name (a release's overlap):
    the invitation is not sent unattributed, and a seat mail speaks of the team unnamed."""
    invited = {
        "email": "bob@example.com",
        "team_name": "Night Owls",
        "role": "member",
        "accept_url": "https://acme.example.com/invitations/accept?token=t",
        "expires_at": "2026-12-03T10:00:00+00:00",
    }
    build = REGISTRY["team-invitation"].triggers[TEAM_INVITED]
    assert build(_event(TEAM_INVITED, {**invited, "inviter_name": "Eve"}), None, "") is None
    props = build(
        _event(TEAM_INVITED, {**invited, "inviter": {"email": "eve@example.com", "name": None}}),
        None,
        "",
    )
    assert props is not None
    assert props["inviter"] == {"email": "eve@example.com", "name": None}

    lost = REGISTRY["team-seat-lost"].triggers[TEAM_SEAT_LOST]
    seat = {"email": "bob@example.com", "team_name": "Night Owls", "seats": 2}
    assert lost(_event(TEAM_SEAT_LOST, seat), None, "") == {"team": None, "seats": 2}
    named = {**seat, "team_named_by": {"email": "ada@example.com", "name": "Ada"}}
    assert lost(_event(TEAM_SEAT_LOST, named), None, "") == {
        "team": {"name": "Night Owls", "named_by": {"email": "ada@example.com", "name": "Ada"}},
        "seats": 2,
    }
