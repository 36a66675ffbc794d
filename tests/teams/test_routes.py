"""Teams over HTTP on real Postgres: creating one, invitations by e-mail and their tokens, roles,
leaving and removal, and who may do what (strangers get 404, members without the role 403)."""

from __future__ import annotations

import re
from typing import Any

import requests

from adapters.db.pool import Database
from tests.access.lifecycle_helpers import settle
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user


class Person:
    def __init__(self, api: Api, db: Database, email: str, name: str | None = None) -> None:
        self.api, self.email = api, email
        self.id = create_user(db, email, name=name)
        self.token = api.token(sub=self.id, email=email)

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return requests.request(
            method, self.api.url + path, json=body, headers=headers, timeout=HANG_GUARD
        )


def new_team(owner: Person, name: str = "Analytical Engines") -> str:
    answer = owner.call("POST", "/api/teams", {"name": name})
    assert answer.status_code == 201, answer.text
    assert answer.json()["name"] == name
    assert answer.json()["role"] == "owner"
    return str(answer.json()["id"])


def invitation_token(api: Api, email: str) -> str:
    """The token of the newest invitation e-mail sent to `email`."""
    settle(api)
    mails = [m for m in outbox(api) if m["To"] == email and "invited" in m["Subject"]]
    assert mails, f"no invitation mailed to {email}"
    found = re.search(r"/invitations/accept\?token=([\w-]+)", text_of(mails[-1]))
    assert found is not None
    return found.group(1)


def join(api: Api, team: str, inviter: Person, person: Person, role: str = "member") -> None:
    sent = inviter.call(
        "POST", f"/api/teams/{team}/invitations", {"email": person.email, "role": role}
    )
    assert sent.status_code == 201, sent.text
    accepted = person.call(
        "POST", "/api/invitations/accept", {"token": invitation_token(api, person.email)}
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json() == {"teamId": team, "role": role}


def test_a_team_is_made_by_its_owner_and_hidden_from_strangers(api: Api, db: Database) -> None:
    ada = Person(api, db, "ada@example.com", "Ada")
    team = new_team(ada)
    stranger = Person(api, db, "eve@example.com")

    body = ada.call("GET", f"/api/teams/{team}").json()
    assert body == {
        "id": team,
        "name": "Analytical Engines",
        "role": "owner",
        "members": [
            {"userId": ada.id, "email": "ada@example.com", "role": "owner", "hasSeat": True}
        ],
        "invitations": [],
        "seats": None,
        "entitlements": [],
    }
    for method, path, payload in (
        ("GET", f"/api/teams/{team}", None),
        ("POST", f"/api/teams/{team}/invitations", {"email": "x@example.com", "role": "member"}),
        ("PATCH", f"/api/teams/{team}/members/{ada.id}", {"role": "member"}),
        ("DELETE", f"/api/teams/{team}/members/{ada.id}", None),
        ("PATCH", f"/api/teams/{team}/seats", {"quantity": 3}),
        ("GET", "/api/teams/not-a-uuid", None),
    ):
        answer = stranger.call(method, path, payload)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json() == {"error": "Team not found"}
    assert requests.get(api.url + f"/api/teams/{team}", timeout=HANG_GUARD).status_code == 401
    assert Person(api, db, "nobody@example.com").call("GET", "/api/me").json()["teams"] == []
    assert ada.call("GET", "/api/me").json()["teams"] == [
        {
            "id": team,
            "name": "Analytical Engines",
            "role": "owner",
            "hasAccess": False,
            "hasSeat": True,
        }
    ]


def test_an_invitation_is_mailed_and_accepted_once_by_the_invited_address(
    api: Api, db: Database
) -> None:
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    sent = ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "grace@example.com", "role": "admin"}
    )
    assert sent.status_code == 201
    assert set(sent.json()) == {"id", "email", "role", "expiresAt"}
    token = invitation_token(api, "grace@example.com")
    [mail] = [m for m in outbox(api) if m["To"] == "grace@example.com"]
    assert "Ada Lovelace" in text_of(mail)
    assert "Analytical Engines" in text_of(mail)
    # Only the hash is kept.
    stored = db.fetch_all("select token_hash from public.team_invitations")
    assert [row["token_hash"] for row in stored] != [token]
    assert len(stored[0]["token_hash"]) == 64
    listed = ada.call("GET", f"/api/teams/{team}").json()["invitations"]
    assert [(i["email"], i["role"]) for i in listed] == [("grace@example.com", "admin")]

    eve = Person(api, db, "eve@example.com")
    refused = eve.call("POST", "/api/invitations/accept", {"token": token})
    assert refused.status_code == 403
    assert "another e-mail address" in refused.json()["error"]
    assert eve.call("GET", f"/api/teams/{team}").status_code == 404
    assert eve.call("POST", "/api/invitations/accept", {"token": "unknown"}).status_code == 400

    grace = Person(api, db, "Grace@Example.com")
    accepted = grace.call("POST", "/api/invitations/accept", {"token": token})
    assert accepted.json() == {"teamId": team, "role": "admin"}
    again = grace.call("POST", "/api/invitations/accept", {"token": token})
    assert again.status_code == 400
    assert "already used" in again.json()["error"]
    members = ada.call("GET", f"/api/teams/{team}").json()
    assert [(m["email"], m["role"]) for m in members["members"]] == [
        ("ada@example.com", "owner"),
        ("Grace@Example.com", "admin"),
    ]
    assert members["invitations"] == []


def test_an_invitations_link_names_the_team_the_role_and_who_sent_it_while_pending(
    api: Api, db: Database
) -> None:
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "grace@example.com", "role": "admin"}
    )
    token = invitation_token(api, "grace@example.com")

    def look_up(body: Any) -> requests.Response:
        return requests.post(api.url + "/api/invitations/lookup", json=body, timeout=10)

    # Its holder (signed in or not) is told what the mail told them, nothing more.
    found = look_up({"token": token})
    assert found.status_code == 200, found.text
    body = found.json()
    assert body.pop("expiresAt")
    assert body == {
        "teamName": "Analytical Engines",
        "role": "admin",
        "invitedBy": {"email": "ada@example.com", "name": "Ada Lovelace"},
    }
    assert look_up({"token": "unknown"}).status_code == 400
    assert look_up({"token": "unknown"}).json() == {
        "error": "This invitation is not known: ask for a new one"
    }
    assert look_up({}).status_code == 400
    grace = Person(api, db, "grace@example.com")
    assert grace.call("POST", "/api/invitations/accept", {"token": token}).status_code == 200
    used = look_up({"token": token})
    assert used.status_code == 400
    assert "already used" in used.json()["error"]


def test_resent_and_revoked_invitations(api: Api, db: Database) -> None:
    ada = Person(api, db, "ada@example.com")
    team = new_team(ada)
    sent = ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "bob@example.com", "role": "member"}
    ).json()
    first = invitation_token(api, "bob@example.com")
    resent = ada.call("POST", f"/api/teams/{team}/invitations/{sent['id']}/resend")
    assert resent.status_code == 200
    assert resent.json()["id"] == sent["id"]
    second = invitation_token(api, "bob@example.com")
    assert second != first
    bob = Person(api, db, "bob@example.com")
    assert bob.call("POST", "/api/invitations/accept", {"token": first}).status_code == 400

    assert ada.call("DELETE", f"/api/teams/{team}/invitations/{sent['id']}").status_code == 204
    revoked = bob.call("POST", "/api/invitations/accept", {"token": second})
    assert revoked.status_code == 400
    assert "revoked" in revoked.json()["error"]
    assert ada.call("DELETE", f"/api/teams/{team}/invitations/{sent['id']}").status_code == 404
    assert bob.call("GET", f"/api/teams/{team}").status_code == 404


def test_an_expired_invitation_changes_nothing(api: Api, db: Database) -> None:
    ada = Person(api, db, "ada@example.com")
    team = new_team(ada)
    ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "bob@example.com", "role": "member"}
    )
    token = invitation_token(api, "bob@example.com")
    with db.transaction() as conn:
        conn.execute("update public.team_invitations set expires_at = now() - interval '1 second'")
    bob = Person(api, db, "bob@example.com")
    answer = bob.call("POST", "/api/invitations/accept", {"token": token})
    assert answer.status_code == 400
    assert "expired" in answer.json()["error"]
    assert db.fetch_all("select count(*) as n from public.team_members")[0]["n"] == 1


def test_roles_decide_who_may_do_what(api: Api, db: Database) -> None:
    ada = Person(api, db, "ada@example.com")
    team = new_team(ada)
    grace, bob = Person(api, db, "grace@example.com"), Person(api, db, "bob@example.com")
    join(api, team, ada, grace, "admin")
    join(api, team, grace, bob)

    invite = {"email": "carl@example.com", "role": "member"}
    assert bob.call("POST", f"/api/teams/{team}/invitations", invite).status_code == 403
    assert bob.call("DELETE", f"/api/teams/{team}/members/{grace.id}").status_code == 403
    assert bob.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 2}).status_code == 403
    assert (
        grace.call("PATCH", f"/api/teams/{team}/members/{bob.id}", {"role": "admin"}).status_code
        == 403
    )
    assert (
        grace.call("DELETE", f"/api/teams/{team}/members/{ada.id}").status_code == 409
    )  # the last owner

    promoted = ada.call("PATCH", f"/api/teams/{team}/members/{bob.id}", {"role": "admin"})
    assert promoted.status_code == 200
    assert promoted.json() == {"userId": bob.id, "role": "admin"}
    # The last owner can neither leave nor step down.
    assert ada.call("DELETE", f"/api/teams/{team}/members/{ada.id}").status_code == 409
    assert (
        ada.call("PATCH", f"/api/teams/{team}/members/{ada.id}", {"role": "admin"}).status_code
        == 409
    )
    assert (
        ada.call("PATCH", f"/api/teams/{team}/members/{grace.id}", {"role": "owner"}).status_code
        == 200
    )
    assert ada.call("DELETE", f"/api/teams/{team}/members/{ada.id}").status_code == 204  # leaves
    assert ada.call("GET", f"/api/teams/{team}").status_code == 404
    # A member may leave.
    assert bob.call("DELETE", f"/api/teams/{team}/members/{bob.id}").status_code == 204
    left = grace.call("GET", f"/api/teams/{team}").json()["members"]
    assert [m["userId"] for m in left] == [grace.id]
    assert (
        grace.call("PATCH", f"/api/teams/{team}/members/{bob.id}", {"role": "member"}).status_code
        == 404
    )


def test_bad_input_is_refused_clearly(api: Api, db: Database) -> None:
    ada = Person(api, db, "ada@example.com")
    team = new_team(ada)
    assert ada.call("POST", "/api/teams", {"name": " "}).json() == {
        "error": "Team name is required (name)"
    }
    answer = ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "x@example.com", "role": "boss"}
    )
    assert answer.status_code == 400
    assert "Role must be" in answer.json()["error"]
    answer = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 0})
    assert answer.status_code == 400
    assert "Quantity" in answer.json()["error"]
    no_plan = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 3})
    assert no_plan.status_code == 409
    assert "no per-seat subscription" in no_plan.json()["error"]
