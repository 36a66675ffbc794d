"""Repository access: a buyer of a `github` product names a GitHub account and is invited."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.bus import EventBus, PublishError
from adapters.db import profiles, purchases
from adapters.db.pool import Database
from adapters.db.purchases import RepositoryPurchase
from adapters.github_api import (
    GitHubGateway,
    GitHubNotConfigured,
    GitHubUnavailable,
    UnknownGitHubAccount,
)
from adapters.tokens import User
from core.email.plan import GITHUB_ACCESS_GRANTED
from core.events import app_event
from services.errors import Forbidden, InvalidRequest, NotConfigured, Unavailable


def grant_repository_access(
    *, user: User, username: str, db: Database, github: GitHubGateway, bus: EventBus
) -> list[str]:
    """Invite `username` to every repository the user bought; returns the repositories."""
    bought = purchases.repository_purchases(db, user.id)
    if not bought:
        raise Forbidden("No repository purchase found for this account")
    for purchase in bought:
        _deliver(purchase, user=user, username=username, db=db, github=github, bus=bus)
    return sorted({p.repository for p in bought})


def _deliver(
    purchase: RepositoryPurchase,
    *,
    user: User,
    username: str,
    db: Database,
    github: GitHubGateway,
    bus: EventBus,
) -> None:
    try:
        github.invite(repository=purchase.repository, username=username)
    except GitHubNotConfigured as exc:
        raise NotConfigured(str(exc)) from exc
    except UnknownGitHubAccount as exc:
        raise InvalidRequest(str(exc)) from exc
    except GitHubUnavailable as exc:
        raise Unavailable("GitHub is unavailable right now; please try again shortly") from exc
    purchases.mark_delivered(db, purchase.id, username)
    _announce(purchase, user=user, username=username, db=db, bus=bus)


def _announce(
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
    try:
        bus.publish(event, data)
    except PublishError as exc:
        raise Unavailable(
            "Access granted, but the confirmation e-mail could not be queued"
        ) from exc
