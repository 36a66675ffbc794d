"""The paying side of the house, as plain data.

An account pays: it has the Stripe customer, the plan, the purchases and the grants
(`core.entitlements.Entitlement`, one per subscription or one-time purchase). Today each account
is one person's own (`personal`), made with their profile; a team that pays is an account of
kind `team` whose members hold seats. A person has access while any grant of their own account
is active (later also of a team where they hold a seat); `profiles.has_access`, `customer_id`
and `price_id` mirror their own account.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from core.entitlements import Entitlement

Kind = Literal["personal", "team"]


@dataclass(frozen=True)
class Account:
    """A paying account as the access cycle reads it (locked), with whom it speaks to."""

    id: str
    kind: Kind
    owner_id: str  # the person whose own account it is (a team's: who pays for it)
    email: str | None  # the owner's, for the mails that speak of access
    name: str | None
    customer_id: str | None
    price_id: str | None
    has_access: bool
    access_changed_at: datetime | None
    price_changed_at: datetime | None


@dataclass(frozen=True)
class Purchase:
    """A recorded purchase as a refund sees it: whose, of what, delivered where."""

    id: str
    session_id: str
    account_id: str | None
    one_time: bool
    repository: str | None
    github_username: str | None


@dataclass(frozen=True)
class State:
    """What the first round trip found: the claims, the locked accounts with their grants, and
    what redeliveries need to be told again."""

    claimed: set[str]
    accounts: Sequence[Account]  # locked, oldest first
    held: Mapping[str, Sequence[Entitlement]]  # by account id, locked
    purchases: Mapping[str, Purchase]  # by payment intent
    recorded: Mapping[str, str]  # the ledger's outcomes of events claimed before
    known: Sequence[Account] = field(default_factory=list)  # redeliveries' accounts, unlocked


def by_customer(accounts: Sequence[Account], customer_id: str | None) -> Account | None:
    """The account that pays as this Stripe customer."""
    return next((a for a in accounts if customer_id and a.customer_id == customer_id), None)


def own_account(
    accounts: Sequence[Account], *, user_id: str | None, email: str | None
) -> Account | None:
    """A person's own account: by their id, else (a guest checkout) the oldest whose owner has
    this e-mail address."""
    for account in accounts:
        if account.kind == "personal" and user_id and account.owner_id == user_id:
            return account
    if user_id is None and email:
        for account in accounts:
            if account.kind == "personal" and (account.email or "").lower() == email.lower():
                return account
    return None


def paying_account(
    accounts: Sequence[Account], *, account_id: str | None, user_id: str | None, email: str | None
) -> Account | None:
    """The account a checkout pays for: a team's when it names one, else the buyer's own."""
    if account_id:
        return next((a for a in accounts if a.id == account_id and a.kind == "team"), None)
    return own_account(accounts, user_id=user_id, email=email)
