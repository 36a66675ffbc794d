"""The rules of teams on plain data: who may do what, the order seats are given in, and when an
invitation may be accepted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from teams.rules import (
    NAME_LIMIT,
    Invitation,
    Member,
    SeatCount,
    acceptance_refusal,
    invite_refusal,
    name_problem,
    no_seat_message,
    removal_refusal,
    role_change_refusal,
    seat_holders,
    seat_order,
    token_hash,
)

T = datetime(2026, 11, 1, tzinfo=UTC)


def test_seats_go_to_owners_then_admins_then_members_by_joining() -> None:
    members = [
        Member("m-early", "member", T),
        Member("admin", "admin", T + timedelta(days=3)),
        Member("m-late", "member", T + timedelta(days=2)),
        Member("owner", "owner", T + timedelta(days=5)),
    ]
    assert [m.user_id for m in seat_order(members)] == ["owner", "admin", "m-early", "m-late"]
    assert seat_holders(members, 3) == {"owner", "admin", "m-early"}
    assert seat_holders(members, 0) == set()
    assert seat_holders(members, None) == {m.user_id for m in members}


@pytest.mark.parametrize(
    ("actor", "target", "self_removal", "owners", "refused"),
    [
        ("member", "member", True, 1, False),  # a member leaves
        ("member", "admin", False, 1, True),
        ("admin", "member", False, 1, False),
        ("admin", "owner", False, 2, True),
        ("owner", "owner", True, 1, True),  # the last owner stays
        ("owner", "owner", True, 2, False),
    ],
)
def test_who_may_remove_whom(
    actor: str, target: str, self_removal: bool, owners: int, refused: bool
) -> None:
    found = removal_refusal(
        actor=actor, target_role=target, self_removal=self_removal, owners=owners
    )
    assert (found is not None) == refused
    if found is not None:  # the last owner is a rule of the team's; the rest, of roles
        assert found.kind == ("conflict" if target == "owner" and owners == 1 else "forbidden")


def test_only_owners_change_roles_and_a_team_keeps_one() -> None:
    assert role_change_refusal(actor="admin", target_role="member", new_role="admin", owners=1)
    assert role_change_refusal(actor="owner", target_role="owner", new_role="member", owners=1)
    assert (
        role_change_refusal(actor="owner", target_role="member", new_role="owner", owners=1) is None
    )
    assert invite_refusal(actor="member", role="member")
    assert invite_refusal(actor="admin", role="owner")
    assert invite_refusal(actor="admin", role="admin") is None


def test_an_invitation_is_accepted_once_in_time_by_its_address() -> None:
    live = Invitation("t", "Grace@example.com", "member", T + timedelta(days=7), None, None)

    def refused(invitation: Invitation | None, email: str, now: datetime = T) -> tuple[str, str]:
        found = acceptance_refusal(invitation, email=email, now=now)
        assert found is not None
        return found.kind, found.message

    assert acceptance_refusal(live, email="grace@EXAMPLE.com", now=T) is None
    assert refused(None, "grace@example.com")[0] == "invalid"
    kind, message = refused(live, "eve@example.com")
    assert kind == "forbidden"
    assert "another e-mail" in message
    assert "expired" in refused(live, "grace@example.com", T + timedelta(days=8))[1]
    used = Invitation("t", "grace@example.com", "member", T + timedelta(days=7), T, None)
    assert "already used" in refused(used, "grace@example.com")[1]
    revoked = Invitation("t", "grace@example.com", "member", T + timedelta(days=7), None, T)
    assert "revoked" in refused(revoked, "grace@example.com")[1]


def test_tokens_are_kept_as_their_sha256_and_a_full_team_says_how_to_grow() -> None:
    assert token_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    message = no_seat_message(SeatCount(total=3, used=3))
    assert "All 3 seats" in message
    # Told to people on the team page: no route, a plural that agrees.
    assert "/api/" not in message
    assert "add seats on the team's page" in message
    assert no_seat_message(SeatCount(total=1, used=1)).startswith(
        "The one seat of this team is taken"
    )


def test_seat_news_tells_each_member_what_is_true_and_new() -> None:
    from teams.rules import SeatChange, seat_news

    changes = [
        SeatChange(1, "lost", False),
        SeatChange(2, "flapped", False),
        SeatChange(3, "flapped", True),  # lost and back before anyone was told: no news
        SeatChange(4, "back", True),
        SeatChange(5, "stale", False),  # a later change is not recorded yet: not true now
        SeatChange(6, "twice", False),
        SeatChange(7, "twice", True),
        SeatChange(8, "twice", False),
    ]
    seated = {"lost": False, "flapped": True, "back": True, "stale": True, "twice": False}
    told = seat_news(changes, seated=seated, team_has_access=True)
    assert sorted((c.user_id, c.id, c.has_seat) for c in told) == [
        ("back", 4, True),
        ("lost", 1, False),
        ("twice", 8, False),
    ]
    # A team without access gives seats of nothing: a seat back is no news then.
    told = seat_news(changes, seated=seated, team_has_access=False)
    assert sorted(c.user_id for c in told) == ["lost", "twice"]
    assert seat_news([], seated=seated, team_has_access=True) == []


LINK = "Team name must not contain a link or an e-mail address"


@pytest.mark.parametrize(
    "name",
    [
        "Night Owls",
        "Analytical Engines Ltd.",
        "R&D v2.0",
        "Équipe Brûlée",
        "開発チーム",
        "Dr. Who's crew",
        "e.g. the ops team",
        "Team @ Acme",
        "Family \U0001f468\u200d\U0001f469\u200d\U0001f467",
        "x" * NAME_LIMIT,
        "Release 2.0.1",
        "Standup at 10:30",
        "Team xn",
    ],
)
def test_plain_team_names_are_accepted(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Acme Security: your account is locked, verify at https://acme.example", LINK),
        ("verify at http:/evil", LINK),
        ("ftp://files", LINK),
        ("www.acme-login", LINK),
        ("evil.com", LINK),
        ("Verify at example.co/path", LINK),
        ("login.acme-security.io now", LINK),
        ("münchen.de", LINK),
        ("\uff45\uff56\uff49\uff4c\uff0e\uff43\uff4f\uff4d", LINK),  # full-width evil.com
        ("evil\u3002com", LINK),
        ("evil\u200d.com", LINK),
        ("write to security@acme.example", LINK),
        ("security@acme", LINK),
        ("1.2.3.4/login", LINK),
        ("sign in at 203.0.113.9", LINK),
        ("\uff11.\uff12.\uff13.\uff14", LINK),  # full-width 1.2.3.4
        ("http to [2001:db8::1]", LINK),
        ("evil.xn--p1ai", LINK),
        ("login.XN--P1AI/verify", LINK),
        ("x" * (NAME_LIMIT + 1), f"Team name is longer than {NAME_LIMIT} characters"),
        ("Night\nOwls", "Team name must not contain line breaks or control characters"),
        ("Night\tOwls", "Team name must not contain line breaks or control characters"),
        ("Night\u2028Owls", "Team name must not contain line breaks or control characters"),
        ("Owls \u202eeman", "Team name must not contain line breaks or control characters"),
        ("Night\u200bOwls", "Team name must not contain line breaks or control characters"),
        ('Night" by Acme "Owls', "Team name must not contain double quotes (e-mails quote it)"),
        ("\u201cOwls\u201d", "Team name must not contain double quotes (e-mails quote it)"),
        ("  ", "Team name is required"),
    ],
)
def test_a_team_name_is_short_plain_text(name: str, problem: str) -> None:
    assert name_problem(name) == problem
