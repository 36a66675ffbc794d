"""Telling a team's members that their seat ended or came back, whoever changed the seats.

The seats are given out in the database (`public.team_refresh`), which records each member's
change; a team route (`PATCH /api/teams/{teamId}/seats`, a member joining, leaving or changing
role) and the access cycle applying Stripe's events (a quantity changed in the billing portal,
a subscription's end) both come here once their change is committed. What is told is read from
that record, so it is the same whichever came first, and told once: each e-mail's id is the
change's (`seat_lost_<id>`), so a repeat or a redelivery publishes the very same message and the
e-mail subscriber sends it once. A repository follows the seat: a member's GitHub account is
taken off a team's repository while their seat (or the team's entitlement) is gone and put back
when it returns, by comparing what is due with what was done, so doing it twice changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from adapters.db.pool import Database
from adapters.github_api import GitHubGateway
from core.app_events import TEAM_SEAT_LOST, TEAM_SEAT_RESTORED
from core.events import Event, app_event
from teams import rules, store

log = logging.getLogger(__name__)

Publish = Callable[[Event, bytes], None]


class SeatsNotTold(RuntimeError):
    """A message could not be published or GitHub failed: what is left is told next time."""


def publish_changes(team_id: str, *, db: Database, publish: Publish, github: GitHubGateway) -> None:
    """Tell the team's members of their seat changes not told yet and make its repositories
    follow the seats. Raises SeatsNotTold after doing what it could; the changes not told stay
    recorded for the next call."""
    failures = [*_mail(team_id, db=db, publish=publish), *_repositories(team_id, db, github)]
    if failures:
        raise SeatsNotTold(f"team {team_id}: " + "; ".join(failures))


def _mail(team_id: str, *, db: Database, publish: Publish) -> list[str]:
    found = store.untold_seat_changes(db, team_id)
    if not found.changes:
        return []
    news = rules.seat_news(
        found.changes, seated=found.seated, team_has_access=found.team_has_access
    )
    people = store.names(db, [change.user_id for change in news])
    team = store.team_name(db, team_id)
    seats = store.seats(db, team_id)
    now = datetime.now(UTC)
    for change in news:
        person: dict[str, Any] = people.get(change.user_id) or {}
        if not person.get("email"):
            continue
        kind = TEAM_SEAT_RESTORED if change.has_seat else TEAM_SEAT_LOST
        obj: dict[str, Any] = {"email": person["email"], "name": person.get("name")}
        if team is not None:
            # The mail quotes the team's name beside who wrote it.
            obj["team_name"] = team.name
            obj["team_named_by"] = {"email": team.author_email, "name": team.author_name}
        if not change.has_seat:
            obj["seats"] = seats.total if seats else 0
        event, data = app_event(
            kind, event_id=f"{kind.rsplit('.', 1)[-1]}_{change.id}", obj=obj, created=now
        )
        try:
            publish(event, data)
        except Exception as exc:  # nothing is marked told: the next call publishes it again
            return [f"the {kind} message to {change.user_id} was not published: {exc}"]
    store.mark_told(db, [change.id for change in found.changes])
    return []


# Passes over a team's repository seats: one more after any change, so that a teller who
# acted on a seat read just before another's change sees that change and follows it.
_PASSES = 3


def _repositories(team_id: str, db: Database, github: GitHubGateway) -> list[str]:
    failures: list[str] = []
    for _ in range(_PASSES):
        failures, acted = _repositories_once(team_id, db, github)
        if not acted:
            break
    return failures


def _repositories_once(team_id: str, db: Database, github: GitHubGateway) -> tuple[list[str], bool]:
    failures, acted = [], False
    for seat in store.repository_seats(db, team_id):
        if seat.due == (not seat.removed):
            continue
        try:
            if seat.due:
                github.invite(repository=seat.repository, username=seat.username)
            else:  # idempotent at GitHub: no collaborator is a 204 too
                github.remove(repository=seat.repository, username=seat.username)
        except Exception as exc:  # GitHub down or unconfigured: done on the next call
            failures.append(f"{seat.username} on {seat.repository}: {exc}")
            continue
        store.mark_repository(
            db,
            team_id=team_id,
            user_id=seat.user_id,
            repository=seat.repository,
            removed=not seat.due,
        )
        acted = True
    return failures, acted
