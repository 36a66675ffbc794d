"""Repository access: a paying buyer of a `github` product, or a member holding a seat of a team
that bought one, names one GitHub account and is invited."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from access import purchases_store as purchases
from access.purchases_store import RepositoryPurchase
from adapters.bus import EventBus, publish_or_unavailable
from adapters.db import profiles
from adapters.db.pool import Database
from adapters.github_api import (
    GitHubGateway,
    GitHubNotConfigured,
    GitHubUnavailable,
    UnknownGitHubAccount,
)
from adapters.tokens import User
from core.app_events import GITHUB_ACCESS_GRANTED
from core.errors import Conflict, Forbidden, InvalidRequest, NotConfigured, Unavailable
from core.events import app_event
from github_access import store as github_grants
from teams import store as teams
from teams.service import member_of
from teams.store import TeamRepository


def grant_repository_access(
    *,
    user: User,
    username: str,
    db: Database,
    github: GitHubGateway,
    bus: EventBus,
    team_id: str | None = None,
) -> list[str]:
    """Invite `username` to every repository the user paid for, and those of the teams where
    they hold a seat (only this team's, with `team_id`); returns the repositories.

    One purchase (or one seat) entitles one GitHub account: asking again for the same account
    is harmless (the invitation is renewed), another account is refused and told which one
    holds it.
    """
    if team_id is not None:
        member_of(user=user, team_id=team_id, db=db)
    bought = purchases.repository_purchases(db, user.id) if team_id is None else []
    seated = teams.seated_repositories(db, user.id, team_id)
    if not (bought or seated):
        if team_id is not None:
            raise Forbidden("You hold no seat of this team with a repository purchase")
        raise Forbidden("No paid repository purchase found for this account")
    for purchase in bought:
        _refuse_another_account(github_grants.granted_to(db, purchase.id), username)
    for seat in seated:
        held = teams.repository_grants(db, seat.team_id, [user.id])
        for repository, holder in held:
            if repository == seat.repository:
                _refuse_another_account(holder, username)
    for purchase in bought:
        _deliver(purchase, user=user, username=username, db=db, github=github, bus=bus)
    for seat in seated:
        _deliver_seat(seat, user=user, username=username, db=db, github=github, bus=bus)
    return sorted({p.repository for p in bought} | {s.repository for s in seated})


def _deliver_seat(
    seat: TeamRepository,
    *,
    user: User,
    username: str,
    db: Database,
    github: GitHubGateway,
    bus: EventBus,
) -> None:
    """A member's seat's access: one GitHub account per member and repository."""
    existed = bool(teams.repository_grants(db, seat.team_id, [user.id]))
    holder = teams.claim_repository(
        db, team_id=seat.team_id, user_id=user.id, repository=seat.repository, username=username
    )
    _refuse_another_account(holder, username)
    try:
        _invite(github, seat.repository, username)
    except BaseException:
        if not existed:
            teams.release_repository(
                db, team_id=seat.team_id, user_id=user.id, repository=seat.repository
            )
        raise
    as_purchase = RepositoryPurchase(
        id=f"{seat.team_id}_{user.id}",
        product_id="",
        product_name=seat.product_name,
        repository=seat.repository,
    )
    _publish_access_granted(as_purchase, user=user, username=holder, db=db, bus=bus)


def _refuse_another_account(holder: str | None, username: str) -> None:
    if holder is not None and holder.lower() != username.lower():
        raise Conflict(f"Repository access for this purchase was granted to GitHub user '{holder}'")


def _deliver(
    purchase: RepositoryPurchase,
    *,
    user: User,
    username: str,
    db: Database,
    github: GitHubGateway,
    bus: EventBus,
) -> None:
    holder, claimed = github_grants.claim(
        db, purchase_id=purchase.id, user_id=user.id, username=username
    )
    _refuse_another_account(holder, username)
    with _released_on_failure(db, purchase.id, claimed):
        _invite(github, purchase.repository, username)
    _publish_access_granted(purchase, user=user, username=holder, db=db, bus=bus)


def _invite(github: GitHubGateway, repository: str, username: str) -> None:
    try:
        github.invite(repository=repository, username=username)
    except GitHubNotConfigured as exc:
        raise NotConfigured(str(exc)) from exc
    except UnknownGitHubAccount as exc:
        raise InvalidRequest(f"{exc} (username)") from exc
    except GitHubUnavailable as exc:
        raise Unavailable("GitHub is unavailable right now; please try again shortly") from exc


@contextmanager
def _released_on_failure(db: Database, purchase_id: str, claimed: bool) -> Iterator[None]:
    """A grant this request made stands only if the invitation went out."""
    try:
        yield
    except BaseException:
        if claimed:
            github_grants.release(db, purchase_id)
        raise


def _publish_access_granted(
    purchase: RepositoryPurchase, *, user: User, username: str, db: Database, bus: EventBus
) -> None:
    """Publish the grant for the e-mail subscriber; one e-mail per purchase and account."""
    profile = profiles.by_id(db, user.id)
    event, data = app_event(
        GITHUB_ACCESS_GRANTED,
        event_id=f"github_{purchase.id}_{username.lower()}",
        obj={
            "email": (profile.email if profile else None) or user.email,
            "name": profile.name if profile else None,
            "repository": purchase.repository,
            "product_name": purchase.product_name,
            "github_username": username,
        },
        created=datetime.now(UTC),
    )
    publish_or_unavailable(
        bus, event, data, told="Access granted, but the confirmation e-mail could not be queued"
    )
