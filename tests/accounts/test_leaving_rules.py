"""The rules of leaving, over plain data."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.leads import removal_token, token_matches
from accounts.leaving_rules import (
    STEPS,
    DeletionPlan,
    TeamMembership,
    closed_teams,
    confirmation_problem,
    last_owner_of,
    remaining,
)
from api.identity import token_refusal


def test_the_steps_left_keep_their_order_whatever_was_done() -> None:
    assert remaining([]) == list(STEPS)
    assert remaining(["leave_teams", "cancel_subscriptions"]) == [
        s for s in STEPS if s not in ("leave_teams", "cancel_subscriptions")
    ]
    assert remaining(list(STEPS)) == []
    # Stripe stops charging first; the address is told before the sign-in goes; the redaction,
    # which Stripe validates at its pace, holds nothing back.
    assert STEPS[0] == "cancel_subscriptions"
    assert STEPS.index("send_goodbye") < STEPS.index("delete_auth_user")
    assert STEPS[-1] == "redact_customers"


def team(role: str, owners: int, members: int) -> TeamMembership:
    return TeamMembership("t1", "Engines", role, owners, members)


@pytest.mark.parametrize(
    ("membership", "held"),
    [
        (team("owner", 1, 2), True),  # the last owner, with someone else in it
        (team("owner", 2, 3), False),  # another owner stays
        (team("owner", 1, 1), False),  # alone: the team closes with the account
        (team("member", 1, 5), False),
        (team("admin", 1, 5), False),
    ],
)
def test_only_the_last_owner_of_a_team_with_members_is_held(
    membership: TeamMembership, held: bool
) -> None:
    assert (last_owner_of([membership]) is not None) is held


def test_a_team_of_one_closes_with_the_account() -> None:
    assert closed_teams([team("owner", 1, 1), TeamMembership("t2", "x", "member", 1, 3)]) == ["t1"]


@pytest.mark.parametrize(
    ("confirm", "problem"),
    [
        (None, "Type your e-mail address to confirm the deletion (confirm)"),
        ("  ", "Type your e-mail address to confirm the deletion (confirm)"),
        (7, "Type your e-mail address to confirm the deletion (confirm)"),
        ("eve@example.com", "The confirmation is not this account's e-mail address (confirm)"),
        (" ADA@example.com ", None),
    ],
)
def test_the_confirmation_is_the_accounts_own_address(confirm: Any, problem: str | None) -> None:
    assert confirmation_problem(confirm, "ada@example.com") == problem


def test_an_account_without_an_address_cannot_be_confirmed() -> None:
    assert confirmation_problem("ada@example.com", None) is not None


def test_a_plan_survives_its_json() -> None:
    plan = DeletionPlan(
        "a@example.com", "Ada", ["sub_1"], [("o/r", "ada-l")], ["t1"], ["t2"], ["cus_1"]
    )
    assert DeletionPlan.from_json(plan.as_json()) == plan


def test_a_removal_token_is_the_addresss_alone() -> None:
    token = removal_token("key", "Ada@Example.com ")
    assert token_matches("key", "ada@example.com", token)
    assert not token_matches("key", "eve@example.com", token)
    assert not token_matches("other", "ada@example.com", token)
    assert not token_matches("key", "ada@example.com", "é" + token[1:])  # no TypeError


def test_a_token_is_refused_once_its_account_is_gone_or_going() -> None:
    assert token_refusal(present=True, leaving=False, resuming=False) is None
    assert token_refusal(present=False, leaving=False, resuming=False) == "This account was deleted"
    assert token_refusal(present=False, leaving=False, resuming=True) == "This account was deleted"
    going = "This account is being deleted"
    assert token_refusal(present=True, leaving=True, resuming=False) == going
    assert token_refusal(present=False, leaving=True, resuming=False) == going
    # Only the deletion asked again, which finishes it, is let through while it runs.
    assert token_refusal(present=True, leaving=True, resuming=True) is None
    assert token_refusal(present=False, leaving=True, resuming=True) is None
