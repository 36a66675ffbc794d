"""What a team's creator writes goes out in mails from the product's own sender, to addresses
anyone may type: over HTTP, a team's name is short plain text (no link, no address, nothing
hidden), the invitation mail quotes it and names who sent it, and a team sends a bounded number
of invitation mails a day, whoever sends them and from wherever."""

from __future__ import annotations

import html as htmllib
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from tests.access.lifecycle_helpers import settle
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD
from tests.teams.test_routes import Person, invitation_token, join, new_team

LINK = "Team name must not contain a link or an e-mail address (name)"


def teams_stored(db: Database) -> int:
    return int(db.fetch_all("select count(*) as n from public.teams")[0]["n"])


@pytest.mark.parametrize(
    "name",
    [
        "Acme Security: your account is locked, verify at https://acme-login.example",
        "Verify at www.acme-login",
        "Acme Security evil.com",
        "Acme example.co/path",
        "Acme Security 1.2.3.4/login",
        "Acme Security evil.xn--p1ai",
    ],
)
def test_a_team_name_with_a_link_is_refused_and_nothing_is_created(
    api: Api, db: Database, name: str
) -> None:
    eve = Person(api, db, "eve@example.com", "Eve")

    answer = eve.call("POST", "/api/teams", {"name": name})

    assert answer.status_code == 400
    assert answer.json() == {"error": LINK}
    assert teams_stored(db) == 0
    assert eve.call("GET", "/api/me").json()["teams"] == []


def test_a_team_name_with_an_email_address_is_refused(api: Api, db: Database) -> None:
    eve = Person(api, db, "eve@example.com", "Eve")

    answer = eve.call("POST", "/api/teams", {"name": "Write to security@acme.example"})

    assert answer.status_code == 400
    assert answer.json() == {"error": LINK}
    assert teams_stored(db) == 0


@pytest.mark.parametrize("name", ["Night\nOwls", "Night\rOwls", "Night\u2028Owls", "Owls\u202e"])
def test_a_team_name_with_line_breaks_or_control_characters_is_refused(
    api: Api, db: Database, name: str
) -> None:
    answer = Person(api, db, "eve@example.com").call("POST", "/api/teams", {"name": name})

    assert answer.status_code == 400
    assert answer.json() == {
        "error": "Team name must not contain line breaks or control characters (name)"
    }
    assert teams_stored(db) == 0


def test_a_team_name_is_at_most_60_characters(api: Api, db: Database) -> None:
    ada = Person(api, db, "ada@example.com", "Ada")

    too_long = ada.call("POST", "/api/teams", {"name": "x" * 61})
    assert too_long.status_code == 400
    assert too_long.json() == {"error": "Team name is longer than 60 characters (name)"}
    assert teams_stored(db) == 0

    team = new_team(ada, "y" * 60)
    assert db.fetch_all("select id::text as id, name from public.teams") == [
        {"id": team, "name": "y" * 60}
    ]


def test_the_database_refuses_a_longer_name_and_keeps_one_from_before(db: Database) -> None:
    """The backstop: a name over 60 characters is refused on insert and on rename, while a team
    named before the rule keeps its name and its other columns still change."""
    from psycopg.errors import CheckViolation

    from teams import store as teams
    from tests.helpers import create_user

    ada = create_user(db, "ada@example.com")
    team = teams.create(db, owner_id=ada, name="Engines").id
    with pytest.raises(CheckViolation), db.transaction() as conn:
        conn.execute("update public.teams set name = %s where id = %s", ("x" * 61, team))
    with db.transaction() as conn:  # as if named before the rule
        conn.execute("alter table public.teams disable trigger teams_name_bounded")
        conn.execute("update public.teams set name = %s where id = %s", ("x" * 80, team))
        conn.execute("alter table public.teams enable trigger teams_name_bounded")
    with db.transaction() as conn:
        conn.execute("update public.teams set quantity = 3 where id = %s", (team,))
    assert db.fetch_all("select name, quantity from public.teams") == [
        {"name": "x" * 80, "quantity": 3}
    ]
    other = create_user(db, "grace@example.com")
    with pytest.raises(CheckViolation):
        teams.create(db, owner_id=other, name="y" * 61)


def test_the_invitation_mail_quotes_the_team_name_and_names_the_inviter(
    api: Api, db: Database
) -> None:
    eve = Person(api, db, "eve@example.com", "Eve")
    team = new_team(eve, "Night Owls")

    sent = eve.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "bob@example.com", "role": "member"}
    )
    assert sent.status_code == 201, sent.text
    invitation_token(api, "bob@example.com")

    [mail] = [m for m in outbox(api) if m["To"] == "bob@example.com"]
    brand = api.container.brand.product_name
    said = f'Eve (eve@example.com) invited you to the team "Night Owls" on {brand}'
    assert mail["Subject"] == said
    assert f"{said} as a member." in text_of(mail)
    html = mail.get_body(preferencelist=("html",))
    assert html is not None
    assert (
        '<strong>Eve (eve@example.com)</strong> invited you to the team <strong>"Night Owls"'
        f"</strong> on {brand} as a member."
    ) in htmllib.unescape(str(html.get_content()))


def test_an_inviters_name_with_a_link_is_left_out_of_the_mail(api: Api, db: Database) -> None:
    eve = Person(api, db, "eve@example.com", "Acme Security, see acme-login.example")
    team = new_team(eve, "Night Owls")

    eve.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "bob@example.com", "role": "member"}
    )
    invitation_token(api, "bob@example.com")

    [mail] = [m for m in outbox(api) if m["To"] == "bob@example.com"]
    assert str(mail["Subject"]).startswith('eve@example.com invited you to the team "Night Owls"')
    assert "acme-login" not in text_of(mail)


def _invite(person: Person, team: str, email: str, address: str) -> requests.Response:
    """An invitation sent from the client address `address` (Cloud Run's front appends the
    client it saw to X-Forwarded-For)."""
    headers = {"Authorization": f"Bearer {person.token}", "X-Forwarded-For": address}
    return requests.post(
        f"{person.api.url}/api/teams/{team}/invitations",
        json={"email": email, "role": "member"},
        headers=headers,
        timeout=HANG_GUARD,
    )


def test_a_team_sends_at_most_its_daily_invitations_whoever_sends_them(
    api_factory: Callable[..., Api], db: Database
) -> None:
    api = api_factory(team_invitations_per_day=3)
    ada = Person(api, db, "ada@example.com", "Ada")
    grace = Person(api, db, "grace@example.com", "Grace")
    team = new_team(ada)
    join(api, team, ada, grace, "admin")  # the first of the day's 3
    assert _invite(ada, team, "bob@example.com", "198.51.100.1").status_code == 201
    assert _invite(grace, team, "carl@example.com", "198.51.100.2").status_code == 201
    settle(api)
    stored = db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"]
    mailed = len(outbox(api))

    # The fourth is refused, whoever sends it from wherever; a resend is a mail too.
    refused = _invite(grace, team, "dan@example.com", "203.0.113.9")
    pending: list[dict[str, Any]] = ada.call("GET", f"/api/teams/{team}").json()["invitations"]
    resent = requests.post(
        f"{api.url}/api/teams/{team}/invitations/{pending[0]['id']}/resend",
        headers={"Authorization": f"Bearer {ada.token}", "X-Forwarded-For": "192.0.2.7"},
        timeout=HANG_GUARD,
    )

    message = (
        "This team reached its daily invitation limit: 3 invitations (sent or resent) in 24 hours."
        " Try again later"
    )
    for answer in (refused, resent):
        assert answer.status_code == 429, answer.text
        assert answer.json() == {"error": message}
        assert 23 * 3600 < int(answer.headers["Retry-After"]) <= 24 * 3600
    settle(api)
    assert db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"] == stored
    assert len(outbox(api)) == mailed
    assert ada.call("GET", f"/api/teams/{team}").json()["invitations"] == pending

    # Another team's invitations are its own.
    eve = Person(api, db, "eve@example.com", "Eve")
    other = new_team(eve, "Night Owls")
    assert _invite(eve, other, "dan@example.com", "203.0.113.9").status_code == 201

    # A day later, the team invites again.
    with db.transaction() as conn:
        conn.execute(
            "update public.team_invitation_mails set sent_at = sent_at - interval '24 hours'"
        )
    assert _invite(grace, team, "dan@example.com", "203.0.113.9").status_code == 201


def test_invitations_at_once_never_pass_the_daily_limit_together(
    api_factory: Callable[..., Api], db: Database
) -> None:
    api = api_factory(team_invitations_per_day=2)
    ada = Person(api, db, "ada@example.com", "Ada")
    team = new_team(ada)

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(
            pool.map(
                lambda n: _invite(ada, team, f"guest{n}@example.com", f"198.51.100.{n}"), range(6)
            )
        )

    assert sorted(a.status_code for a in answers) == [201, 201, 429, 429, 429, 429]
    assert db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"] == 2


PERSON_LIMIT = (
    "You reached your daily invitation limit: {n} invitations (sent or resent) in 24 hours,"
    " across all your teams. Try again later"
)


def test_a_person_sends_at_most_their_daily_invitations_across_all_their_teams(
    api_factory: Callable[..., Api], db: Database
) -> None:
    """A new team does not give its creator a new day's invitations: the limit counts each
    inviter across their teams, as well as each team."""
    api = api_factory(team_invitations_per_day=3, invitations_per_person_per_day=4)
    eve = Person(api, db, "eve@example.com", "Eve")
    first = new_team(eve, "Night Owls")
    for n in range(3):
        assert _invite(eve, first, f"a{n}@example.com", "198.51.100.1").status_code == 201
    second = new_team(eve, "Early Birds")
    assert _invite(eve, second, "b0@example.com", "198.51.100.2").status_code == 201
    settle(api)
    stored = db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"]
    mailed = len(outbox(api))

    # A third team, a fresh address, another client: refused all the same; a resend too.
    third = new_team(eve, "Late Owls")
    refused = _invite(eve, third, "c0@example.com", "203.0.113.9")
    pending: list[dict[str, Any]] = eve.call("GET", f"/api/teams/{second}").json()["invitations"]
    resent = requests.post(
        f"{api.url}/api/teams/{second}/invitations/{pending[0]['id']}/resend",
        headers={"Authorization": f"Bearer {eve.token}", "X-Forwarded-For": "192.0.2.7"},
        timeout=10,
    )

    for answer in (refused, resent):
        assert answer.status_code == 429, answer.text
        assert answer.json() == {"error": PERSON_LIMIT.format(n=4)}
        assert 23 * 3600 < int(answer.headers["Retry-After"]) <= 24 * 3600
    settle(api)
    assert db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"] == stored
    assert len(outbox(api)) == mailed
    assert eve.call("GET", f"/api/teams/{second}").json()["invitations"] == pending

    # Another admin of the same team still invites: the team's own limit has room.
    grace = Person(api, db, "grace@example.com", "Grace")
    _admit(db, second, grace)
    assert _invite(grace, second, "d0@example.com", "203.0.113.10").status_code == 201

    # A day later, Eve invites again.
    with db.transaction() as conn:
        conn.execute(
            "update public.team_invitation_mails set sent_at = sent_at - interval '24 hours'"
        )
    assert _invite(eve, third, "c0@example.com", "203.0.113.9").status_code == 201


def _admit(db: Database, team: str, person: Person) -> None:
    """`person` made an admin of the team directly (an invitation would be one of the day's)."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, 'admin')",
            (team, person.id),
        )


def test_invitations_at_once_from_several_teams_never_pass_the_persons_limit_together(
    api_factory: Callable[..., Api], db: Database
) -> None:
    api = api_factory(invitations_per_person_per_day=2)
    eve = Person(api, db, "eve@example.com", "Eve")
    teams = [new_team(eve, f"Team {n}") for n in range(3)]

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(
            pool.map(
                lambda n: _invite(eve, teams[n % 3], f"guest{n}@example.com", f"198.51.100.{n}"),
                range(6),
            )
        )

    assert sorted(a.status_code for a in answers) == [201, 201, 429, 429, 429, 429]
    assert db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"] == 2


def test_someone_signed_in_without_an_address_cannot_send_an_invitation(
    api: Api, db: Database
) -> None:
    """An invitation mail names its sender by address: a member signed in by phone has none."""
    phone = str(uuid.uuid4())
    with db.transaction() as conn:
        conn.execute("insert into auth.users (id) values (%s)", (phone,))
    token = api.token(sub=phone, email="")
    headers = {"Authorization": f"Bearer {token}"}
    created = requests.post(
        f"{api.url}/api/teams", json={"name": "Night Owls"}, headers=headers, timeout=HANG_GUARD
    )
    assert created.status_code == 201, created.text

    answer = requests.post(
        f"{api.url}/api/teams/{created.json()['id']}/invitations",
        json={"email": "bob@example.com", "role": "member"},
        headers=headers,
        timeout=HANG_GUARD,
    )

    assert answer.status_code == 403
    assert answer.json() == {
        "error": "Invitations name their sender by e-mail address: sign in with one to invite"
    }
    assert db.fetch_all("select count(*) as n from public.team_invitations")[0]["n"] == 0
