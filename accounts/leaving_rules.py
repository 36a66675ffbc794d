"""Leaving: what deleting an account does, in which order, and what stays for the books.

Plain rules over plain data: `accounts/leaving.py` reads what they need and does the steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The steps of a deletion, in the order they run. Each is idempotent and is recorded as done
# only after it succeeded, so a deletion cut short anywhere is finished by running the steps
# not recorded yet, in this order. The order is why it finishes: Stripe stops charging before
# anything else goes; the repositories and teams are left while the person's rows still say
# which; their data is erased, then they are told (their address is in the plan, not read from
# the rows just erased), then the sign-in goes; Stripe's redaction, which Stripe validates at
# its own pace, comes last so that it never holds the rest back.
STEPS: tuple[str, ...] = (
    "cancel_subscriptions",
    "remove_repositories",
    "leave_teams",
    "erase_personal_data",
    "send_goodbye",
    "delete_auth_user",
    "redact_customers",
)

# What a kept purchase loses: the fields that name the person. What stays (amounts, currency,
# dates, Stripe's ids of the checkout, payment and customer) is what the books need and what
# ties the row to Stripe's invoice, which tax law has Stripe and the seller keep.
PURCHASE_FIELDS_CLEARED: tuple[str, ...] = ("user_id", "customer_email")

# Founder tasks' kinds.
REDACT_IN_DASHBOARD = "stripe_redact_customer"


@dataclass(frozen=True)
class TeamMembership:
    team_id: str
    name: str
    role: str
    owners: int  # the team's owners, the person among them if they are one
    members: int  # the team's members, the person among them


@dataclass(frozen=True)
class DeletionPlan:
    """What a deletion's steps act on, read once when it is asked for: each step erases some of
    what a later one would have read."""

    email: str | None
    name: str | None
    subscriptions: list[str] = field(default_factory=list)  # Stripe subscription ids
    repositories: list[tuple[str, str]] = field(default_factory=list)  # (repository, login)
    teams_left: list[str] = field(default_factory=list)  # teams that go on without them
    teams_closed: list[str] = field(default_factory=list)  # teams of which they are all
    customers: list[str] = field(default_factory=list)  # Stripe customers to redact

    def as_json(self) -> dict[str, Any]:
        return {
            "email": self.email,
            "name": self.name,
            "subscriptions": self.subscriptions,
            "repositories": [list(r) for r in self.repositories],
            "teams_left": self.teams_left,
            "teams_closed": self.teams_closed,
            "customers": self.customers,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeletionPlan:
        return cls(
            email=data.get("email"),
            name=data.get("name"),
            subscriptions=list(data.get("subscriptions") or []),
            repositories=[(str(r[0]), str(r[1])) for r in data.get("repositories") or []],
            teams_left=list(data.get("teams_left") or []),
            teams_closed=list(data.get("teams_closed") or []),
            customers=list(data.get("customers") or []),
        )


def remaining(done: Sequence[str]) -> list[str]:
    """The steps still to run, in order."""
    return [step for step in STEPS if step not in done]


def last_owner_of(teams: Sequence[TeamMembership]) -> TeamMembership | None:
    """The first team the person is the last owner of while others are in it: the account may
    not go until someone else owns the team (or the others left); None: nothing holds it."""
    for team in teams:
        if team.role == "owner" and team.owners <= 1 and team.members > 1:
            return team
    return None


def refusal_for(team: TeamMembership) -> str:
    return (
        f"You are the last owner of the team '{team.name}' ({team.team_id}), which has other"
        " members: make one of them an owner, or remove them, before deleting your account"
    )


def closed_teams(teams: Sequence[TeamMembership]) -> list[str]:
    """The teams the person is the only member of: they close with the account."""
    return [t.team_id for t in teams if t.members <= 1]


def confirmation_problem(confirm: Any, email: str | None) -> str | None:
    """Why `confirm` does not confirm the deletion of the account with this address (None: it
    does). The person types their own address, ignoring case and surrounding spaces."""
    if not isinstance(confirm, str) or not confirm.strip():
        return "Type your e-mail address to confirm the deletion (confirm)"
    if email is None or confirm.strip().lower() != email.strip().lower():
        return "The confirmation is not this account's e-mail address (confirm)"
    return None


def redaction_task_detail(customer_id: str, reason: str) -> str:
    """What the founder is asked to do for a customer Stripe was not asked to redact by API."""
    return (
        f"Redact the personal data of the Stripe customer {customer_id}, whose account was"
        f" deleted, in the Stripe Dashboard: {reason}"
    )
