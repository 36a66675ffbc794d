"""The paying side of the house, as plain data.

An account pays: it has the Stripe customers, the plan, the purchases and the grants
(`access.entitlements.Entitlement`, one per subscription or one-time purchase). Each Stripe
customer belongs to one account, for good; the account's billing customer (`customer_id`, the one
checkout and the portal use) is one of them. Today each account
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

from access.entitlements import Entitlement

AccountKind = Literal["personal", "team"]


@dataclass(frozen=True)
class Account:
    """A paying account as the access cycle reads it (locked), with whom it speaks to."""

    id: str
    kind: AccountKind
    owner_id: str  # the person whose own account it is (a team's: its creator, for the books)
    # Whom the mails that speak of access address: the person; a team's current owner.
    email: str | None
    name: str | None
    customer_id: str | None  # the billing customer
    price_id: str | None
    has_access: bool
    access_changed_at: datetime | None
    price_changed_at: datetime | None
    customers: tuple[str, ...] = ()  # every Stripe customer that belongs to it
    created_at: datetime | None = None
    # An admin's comp still runs on it: access the cycle never decides on, but a mail that says
    # access ended must not be told while it remains.
    comped: bool = False


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
    # The customers named whose account a person's deletion removed: their events are settled.
    erased: frozenset[str] = frozenset()


def by_customer(accounts: Sequence[Account], customer_id: str | None) -> Account | None:
    """The account this Stripe customer belongs to."""
    return next((a for a in accounts if customer_id and customer_id in a.customers), None)


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
    accounts: Sequence[Account],
    *,
    account_id: str | None,
    user_id: str | None,
    email: str | None,
    customer_id: str | None = None,
) -> Account | None:
    """The account a checkout pays for: a team's when it names one, else the signed-in buyer's
    own; a guest's is the account their customer belongs to, else whoever has the e-mail address
    they typed (unverified: it may receive the product, never change a link)."""
    if account_id:
        return next((a for a in accounts if a.id == account_id and a.kind == "team"), None)
    if user_id is None:
        known = by_customer(accounts, customer_id)
        if known is not None:
            return known
    return own_account(accounts, user_id=user_id, email=email)


def billing_customer(
    account: Account, *, customer_id: str | None, signed_in: bool, opened_at: datetime | None
) -> str | None:
    """The account's billing customer once a checkout (opened at `opened_at`) paid as
    `customer_id`. A checkout its own signed-in user (a team's owner or admin) made sets it to
    that customer when the customer is the account's. A guest's sets it only on an account made
    for that purchase (after the checkout opened, for the address paid with) that has none: a
    guest who typed someone else's address never changes their link."""
    if not customer_id or customer_id not in account.customers:
        return account.customer_id
    if signed_in:
        return customer_id
    made_for_it = (
        account.customer_id is None
        and opened_at is not None
        and account.created_at is not None
        and account.created_at >= opened_at
    )
    return customer_id if made_for_it else account.customer_id
