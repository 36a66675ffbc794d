"""Checkout and customer portal: core.checkout's rules applied to stored products and profiles."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from adapters.db import products, profiles
from adapters.db.pool import Database
from adapters.stripe_api import PaymentsNotConfigured, PaymentsUnavailable, StripeGateway
from adapters.tokens import User
from core.checkout import Buyer, Mode, Offer, mode_matches, session_params
from services.errors import InvalidRequest, NotConfigured, Unavailable


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
) -> str | None:
    """The Stripe Checkout URL for one product; None when Stripe refuses. `offer`: the
    operator's (recovery, consent); the product's trial is added here."""
    product = products.active_by_price(db, price_id)
    if product is None:
        raise InvalidRequest("Unknown or inactive price ID (priceId)")
    if not mode_matches(mode, product.billing_type):
        raise InvalidRequest(
            f"Mode '{mode}' (mode) does not match this product's billing type"
            f" '{product.billing_type}'"
        )
    params = session_params(
        price_id=price_id,
        mode=mode,
        success_url=success_url,
        cancel_url=cancel_url,
        buyer=_buyer(user, db),
        offer=replace(offer or Offer(), trial_days=product.trial_days),
        # A guest proves the session is theirs on the success page with this (no account yet).
        guest_token=secrets.token_urlsafe(32) if user is None else None,
    )
    with _stripe_errors():
        return stripe.create_checkout_session(params)


def create_portal(
    *, return_url: str, user: User, db: Database, stripe: StripeGateway
) -> str | None:
    """The Stripe customer portal URL for the signed-in user; None when Stripe refuses."""
    profile = profiles.by_id(db, user.id)
    if profile is None or not profile.customer_id:
        raise InvalidRequest("No billing account yet: make a purchase first")
    with _stripe_errors():
        return stripe.create_portal_session(customer_id=profile.customer_id, return_url=return_url)


@contextmanager
def _stripe_errors() -> Iterator[None]:
    try:
        yield
    except PaymentsNotConfigured as exc:
        raise NotConfigured(str(exc)) from exc
    except PaymentsUnavailable as exc:
        raise Unavailable("Payments are unavailable right now; please try again shortly") from exc


def _buyer(user: User | None, db: Database) -> Buyer:
    if user is None:
        return Buyer()
    profile = profiles.by_id(db, user.id)
    if profile is None:
        return Buyer(user_id=user.id, email=user.email)
    return Buyer(
        user_id=user.id, email=profile.email or user.email, customer_id=profile.customer_id
    )
