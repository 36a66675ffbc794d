"""An entitlement as the API answers it (GET /api/me, GET /api/teams/{teamId}, the checkout
completion): the grant's facts and its words."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from access import grant_words_service as grant_words
from access.entitlements_store import Held
from credits.rules import Credits


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EntitledProduct(_Answer):
    id: str
    name: str
    type: str
    # A `link` product's download while the entitlement is active (None otherwise), for the
    # dashboard's purchases.
    downloadUrl: str | None = None


class ScheduledChangeAnswer(_Answer):
    priceId: str
    quantity: int
    at: datetime  # when it takes effect: the period's end


class EntitlementAnswer(_Answer):
    product: EntitledProduct | None  # None: a price no product row is sold at any more
    priceId: str | None
    kind: Literal["subscription", "purchase", "comp"]  # comp: given by an admin, no payment
    status: str
    active: bool
    currentPeriodEnd: datetime | None
    cancelAtPeriodEnd: bool
    trialEnd: datetime | None
    endedAt: datetime | None
    teamId: str | None = None  # the team whose account holds it; None: the user's own
    # What it is and what comes next, in words a page shows as is (access/grant_words.py): a
    # comp's end, a trial's end and first charge, a pack's credits, a renewal.
    label: str
    summary: str
    # What is scheduled for the period's end: the plan it moves to, or the end (`cancelAt`).
    scheduledChange: ScheduledChangeAnswer | None = None
    cancelAt: datetime | None = None


def entitlement_of(held: Held, held_credits: Sequence[Credits] = ()) -> EntitlementAnswer:
    e = held.entitlement
    told = grant_words.of_held(held, held_credits)
    product = (
        EntitledProduct(
            id=held.product_id,
            name=held.product_name,
            type=held.product_type,
            downloadUrl=held.download_url if e.active else None,
        )
        if held.product_id and held.product_name and held.product_type
        else None
    )
    return EntitlementAnswer(
        product=product,
        priceId=e.price_id,
        kind=e.kind,
        status=e.status,
        active=e.active,
        currentPeriodEnd=e.current_period_end,
        cancelAtPeriodEnd=e.cancel_at_period_end,
        trialEnd=e.trial_end,
        endedAt=e.ended_at,
        teamId=held.team_id,
        label=told.label,
        summary=told.summary,
        scheduledChange=(
            ScheduledChangeAnswer(
                priceId=held.scheduled_price_id,
                quantity=held.scheduled_quantity,
                at=held.scheduled_at,
            )
            if held.scheduled_price_id and held.scheduled_quantity and held.scheduled_at
            else None
        ),
        cancelAt=e.current_period_end if e.active and e.cancel_at_period_end else None,
    )


def entitlement_answer(held: Held) -> EntitlementAnswer:
    """An entitlement as GET /api/me and GET /api/teams/{teamId} answer it."""
    return entitlement_of(held)
