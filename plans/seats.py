"""A team's seats changed as any plan change is (`plans/service.py`): more seats now, invoiced
now, and given out once Stripe took the payment; fewer at the period's end."""

from __future__ import annotations

from adapters.bus import EventBus
from adapters.db.pool import Database
from adapters.github_api import GitHubGateway
from adapters.stripe_api import StripeGateway
from adapters.tokens import User
from core.errors import Conflict
from plans.service import Wanted, change
from teams import service as teams
from teams import store as team_store
from teams.rules import SeatCount


def set_team_seats(
    *,
    user: User,
    team_id: str,
    quantity: int,
    db: Database,
    stripe: StripeGateway,
    bus: EventBus,
    github: GitHubGateway,
    secret: str,
) -> SeatCount:
    """Change the team's seats as any plan change is (plans/service.py): more seats now,
    invoiced now, and given out once Stripe took the payment; fewer at the period's end, the
    seats kept until then (Stripe's events then give them out)."""
    teams.manager_of(user=user, team_id=team_id, db=db)
    subscription = team_store.subscription(db, team_id)
    if subscription is None:
        raise Conflict("This team has no per-seat subscription: buy one with create-checkout")
    held = team_store.seats(db, team_id)
    if held is not None and held.total == quantity:
        # The seats it holds already: the same request sent again answers as the first did
        # (a change still scheduled stays, and GET /api/me tells it).
        return held
    applied = change(
        subscription,
        Wanted(quantity=quantity),
        proration_date=None,
        stripe=stripe,
        secret=secret,
        db=db,
    )
    if applied.preview.effective == "now":
        team_store.set_quantity(db, team_id, quantity)
        teams.publish_seat_changes(team_id, db=db, bus=bus, github=github)
    seats = team_store.seats(db, team_id)
    return seats if seats is not None else SeatCount(total=quantity, used=quantity)
