"""Checkout and customer portal: billing.rules's rules applied to stored products and profiles."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from adapters.db import profiles
from adapters.db.pool import Database
from adapters.stripe_api import PaymentsNotConfigured, PaymentsUnavailable, StripeGateway
from adapters.tokens import User
from api.identity import require_user
from billing.rules import (
    Buyer,
    Mode,
    Offer,
    SeatChoice,
    missing_tax_setting,
    mode_matches,
    session_params,
)
from catalogue import store as products
from core.errors import InvalidRequest, NotConfigured, Unavailable
from teams import store as teams
from teams.service import manager_of


def create_checkout(
    *,
    price_id: str,
    mode: Mode,
    success_url: str,
    cancel_url: str,
    user: User | None,
    db: Database,
    stripe: StripeGateway,
    offer: Offer | None = None,
    team_id: str | None = None,
    quantity: int | None = None,
) -> str | None:
    """The Stripe Checkout URL for one product; None when Stripe refuses. `offer`: the
    operator's (recovery, consent); the product's trial is added here. With `team_id` the team
    buys (its owners and admins only), and a per-seat price sells `quantity` seats, never fewer
    than its members."""
    product = products.active_by_price(db, price_id)
    if product is None:
        raise InvalidRequest("Unknown or inactive price ID (priceId)")
    if not mode_matches(mode, product.billing_type):
        raise InvalidRequest(
            f"Mode '{mode}' (mode) does not match this product's billing type"
            f" '{product.billing_type}'"
        )
    offer = offer or Offer()
    named = f"'{product.name}' ({product.stripe_product_id or price_id})"
    if missing := missing_tax_setting(offer.tax, product=named, tax_code=product.tax_code):
        raise InvalidRequest(missing)
    buyer, seats = _buyer(user, db), None
    if team_id is not None:
        buyer, seats = _team_buyer(user, team_id, price_id, quantity, db)
    elif quantity is not None:
        raise InvalidRequest("Quantity is for a team's per-seat price: pass teamId too")
    params = session_params(
        price_id=price_id,
        mode=mode,
        success_url=success_url,
        cancel_url=cancel_url,
        buyer=buyer,
        offer=replace(offer, trial_days=product.trial_days),
        # A guest proves the session is theirs on the success page with this (no account yet).
        guest_token=secrets.token_urlsafe(32) if user is None else None,
        seats=seats,
    )
    with _stripe_errors():
        return stripe.create_checkout_session(params)


def create_portal(
    *,
    return_url: str,
    user: User,
    db: Database,
    stripe: StripeGateway,
    team_id: str | None = None,
) -> str | None:
    """The Stripe customer portal URL for the signed-in user, or for a team they own or
    administer; None when Stripe refuses."""
    if team_id is not None:
        manager_of(user=user, team_id=team_id, db=db)
        customer_id = teams.customer(db, team_id)
    else:
        profile = profiles.by_id(db, user.id)
        customer_id = profile.customer_id if profile else None
    if not customer_id:
        raise InvalidRequest("No billing account yet: make a purchase first")
    with _stripe_errors():
        return stripe.create_portal_session(customer_id=customer_id, return_url=return_url)


@contextmanager
def _stripe_errors() -> Iterator[None]:
    try:
        yield
    except PaymentsNotConfigured as exc:
        raise NotConfigured(str(exc)) from exc
    except PaymentsUnavailable as exc:
        raise Unavailable("Payments are unavailable right now; please try again shortly") from exc


def _team_buyer(
    user: User | None, team_id: str, price_id: str, quantity: int | None, db: Database
) -> tuple[Buyer, SeatChoice | None]:
    """The team's account pays; a per-seat price starts at `quantity` seats (else one per
    member), never fewer than the members."""
    signed_in = require_user(user)
    manager_of(user=signed_in, team_id=team_id, db=db)
    seats = None
    if teams.sold_per_seat(db, price_id):
        members = teams.member_count(db, team_id)
        seats = SeatChoice(quantity=quantity or members, minimum=members)
    elif quantity is not None:
        raise InvalidRequest("Quantity is only for a per-seat price")
    profile = profiles.by_id(db, signed_in.id)
    email = (profile.email if profile else None) or signed_in.email
    buyer = Buyer(
        user_id=signed_in.id, email=email, customer_id=teams.customer(db, team_id), team_id=team_id
    )
    return buyer, seats


def _buyer(user: User | None, db: Database) -> Buyer:
    if user is None:
        return Buyer()
    profile = profiles.by_id(db, user.id)
    if profile is None:
        return Buyer(user_id=user.id, email=user.email)
    return Buyer(
        user_id=user.id, email=profile.email or user.email, customer_id=profile.customer_id
    )
