"""The teams' side of the fault run, over the API's HTTP routes: each owner creates their team,
then each round of membership changes is made as its people would make them (signed in with
their own access tokens). An invitee accepts with the token their invitation e-mail carries, as
Resend received it; every route's answer is compared with the model's."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import requests

from adapters.tokens import issue_token
from tests.fakes.resend import FakeResend
from tests.faultrun.steps import Planned
from tests.faultrun.teams import Op, Person

_TOKEN = re.compile(r"/invitations/accept\?token=([\w-]+)")
INVITATION_MAIL = "/team-invitation"


@dataclass
class Members:
    api: str  # the API's base URL
    jwt_secret: str
    resend: FakeResend
    mail_timeout: float = 60.0
    teams: dict[int, str] = field(default_factory=dict)  # the scenario's number -> team id
    differences: list[str] = field(default_factory=list)
    # Redeliver the e-mail subscription's messages published since then (the emulator may stop
    # retrying failed pushes: see tests/faultrun/watch.py `replay`).
    replay: Callable[[float], None] | None = None
    stall: float = 10.0
    calls: int = 0
    owners: list[Person] = field(default_factory=list)
    _session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        self._session.trust_env = False  # loopback: no proxy from the environment

    def create(self, owners: Sequence[Person]) -> None:
        """Each owner makes their team: POST /api/teams."""
        for number, owner in enumerate(owners):
            answer = self._call(owner, "POST", "/api/teams", {"name": f"Fault team {number}"})
            assert answer.status_code == 201, answer.text
            self.teams[number] = str(answer.json()["id"])
        self.owners = list(owners)

    def bound(self, batch: list[Planned]) -> list[Planned]:
        """The deliveries with each team's checkout naming the team's id, now that it has one."""
        out = []
        for e in batch:
            if e.customer.team is not None:
                placeholder = e.customer.placeholder().encode()
                e = replace(
                    e, body=e.body.replace(placeholder, self.teams[e.customer.team].encode())
                )
            out.append(e)
        return out

    def play(self, ops: Sequence[Op]) -> None:
        """One round: removals, role changes and invitations, then the acceptances, each with
        the token mailed for its invitation."""
        since = time.time() - 1
        invited: dict[tuple[int, str], str] = {}  # (team, e-mail) -> invitation id
        tokens: dict[tuple[int, str], str] | None = None
        for op in ops:
            team = self.teams[op.team]
            if op.kind == "accept":
                if tokens is None:
                    tokens = self._tokens(invited, since)
                token = tokens.get((op.team, op.person.email))
                if token is None:
                    continue  # told already: no invitation, or its e-mail never came
                answer = self._call(op.actor, "POST", "/api/invitations/accept", {"token": token})
                self._expect(op, answer, {"teamId": team, "role": op.role})
            elif op.kind == "invite":
                body = {"email": op.person.email, "role": op.role}
                answer = self._call(op.actor, "POST", f"/api/teams/{team}/invitations", body)
                if self._expect(op, answer) and answer.status_code == 201:
                    invited[(op.team, op.person.email)] = str(answer.json()["id"])
            elif op.kind == "remove":
                path = f"/api/teams/{team}/members/{op.person.user_id}"
                self._expect(op, self._call(op.actor, "DELETE", path))
            else:
                path = f"/api/teams/{team}/members/{op.person.user_id}"
                self._expect(op, self._call(op.actor, "PATCH", path, {"role": op.role}))

    def _tokens(
        self, invited: dict[tuple[int, str], str], since: float
    ) -> dict[tuple[int, str], str]:
        """The token of each invitation, from its e-mail once delivered (the e-mail subscriber
        sends it through the bus, faults and all)."""
        found: dict[tuple[int, str], str] = {}
        deadline = time.monotonic() + self.mail_timeout
        moved, last = time.monotonic(), 0
        while len(found) < len(invited) and time.monotonic() < deadline:
            if len(found) != last:
                moved, last = time.monotonic(), len(found)
            elif self.replay is not None and time.monotonic() - moved > self.stall:
                self.replay(since)
                moved = time.monotonic()
            mails = list(zip(self.resend.delivered_keys, self.resend.delivered, strict=False))
            for (team, email), invitation in invited.items():
                prefix = f"team_invitation_{invitation}_"
                for key, message in mails:
                    if (team, email) in found or not (key and key.startswith(prefix)):
                        continue
                    token = _TOKEN.search(str(message.get("text") or message.get("html")))
                    if token is not None and key.endswith(INVITATION_MAIL):
                        found[(team, email)] = token.group(1)
                        if message["to"] != [email]:
                            self.differences.append(
                                f"invitation to {email} mailed to {message['to']}"
                            )
            time.sleep(0.1)
        self.differences += [
            f"team {team}: no invitation e-mail to {email} within {self.mail_timeout:.0f} s"
            for (team, email) in invited.keys() - found.keys()
        ]
        return found

    def _expect(self, op: Op, answer: requests.Response, body: Any = None) -> bool:
        if answer.status_code != op.status:
            self.differences.append(
                f"{op.describe()}: expected {op.status}, answered {answer.status_code}"
                f" {answer.text[:200]} (the team: {self._seen(op)})"
            )
            return False
        if body is not None and answer.json() != body:
            self.differences.append(f"{op.describe()}: answered {answer.json()}, not {body}")
        return True

    def _seen(self, op: Op) -> Any:
        """The team as its owner sees it, to tell what the answer was based on."""
        view = self._call(self.owners[op.team], "GET", f"/api/teams/{self.teams[op.team]}").json()
        return {k: view.get(k) for k in ("seats", "members", "entitlements")}

    def _call(self, person: Person, method: str, path: str, body: Any = None) -> requests.Response:
        self.calls += 1
        token = issue_token(
            secret=self.jwt_secret, user_id=person.user_id, email=person.email, supabase_url=None
        )
        return self._session.request(
            method,
            self.api + path,
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
