"""The end state against the model: profiles, grants, teams' members and seats, the access
ledger, e-mails, dead letters."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from runtime.consumers import subscription_of
from tests.fakes.resend import FakeResend
from tests.faultrun.model import Profile, Scenario
from tests.faultrun.watch import DeadLetters

TEAM_MAIL = "team-"  # the kinds of a team's own e-mails
CREDITS_LOW = "credits-low"  # sent as the run's consumptions go (tests/faultrun/usage.py)


def differences(
    scenario: Scenario,
    *,
    database_url: str,
    resend: FakeResend,
    dead: DeadLetters,
    accepted: Counter[str],
    topic: str,
    teams: dict[int, str] | None = None,
) -> list[str]:
    """What differs from the model, one line each; empty when everything matches. `teams`:
    each team's id, by its number in the scenario."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        outcomes = access_outcomes(conn)
        found: list[str] = []
        found += _profiles(scenario, conn)
        found += _entitlements(scenario, conn, teams or {})
        found += _members(scenario, conn, teams or {})
        found += _ledger(scenario, outcomes)
        found += _emails(scenario, conn, resend, outcomes)
    access = subscription_of(topic, "access")
    found += _dead_letters(scenario, dead, accepted, access, outcomes)
    return found


def _profiles(scenario: Scenario, conn: psycopg.Connection[dict[str, Any]]) -> list[str]:
    expected = scenario.profiles()
    rows = conn.execute(
        "select id::text as id, has_access, customer_id, price_id from public.profiles"
        " where id::text = any(%s) or customer_id like 'cus\\_ghost%%'",
        (list(expected),),
    ).fetchall()
    actual = {r["id"]: Profile(r["has_access"], r["customer_id"], r["price_id"]) for r in rows}
    return [
        f"profile {user}: expected {expected.get(user)}, found {actual.get(user)}"
        for user in sorted(expected.keys() | actual.keys())
        if expected.get(user) != actual.get(user)
    ]


def _entitlements(
    scenario: Scenario, conn: psycopg.Connection[dict[str, Any]], teams: dict[int, str]
) -> list[str]:
    """One row per grant of each linked customer (a person's own account, or a team's),
    active as the grant's newest change says."""
    expected = {
        (_account(customer.user_id, customer.team), source): active
        for customer in scenario.customers
        if customer.user_id is not None
        for source, active in scenario.grants(customer).items()
    }
    users = [c.user_id for c in scenario.customers if c.user_id is not None]
    numbers = {team_id: number for number, team_id in teams.items()}
    rows = conn.execute(
        "select a.owner_id::text as owner, a.kind, a.id::text as account, e.source_id, e.active"
        " from public.entitlements e join public.accounts a on a.id = e.account_id"
        " where a.owner_id::text = any(%s) or a.id::text = any(%s)",
        (users, list(numbers)),
    ).fetchall()
    actual = {
        (
            _account(r["owner"], numbers.get(r["account"], -1) if r["kind"] == "team" else None),
            r["source_id"],
        ): r["active"]
        for r in rows
    }
    return [
        f"entitlement {source} of {who}: expected {expected.get((who, source))},"
        f" found {actual.get((who, source))}"
        for who, source in sorted(expected.keys() | actual.keys())
        if expected.get((who, source)) != actual.get((who, source))
    ]


def teams_now(scenario: Scenario, database_url: str, teams: dict[int, str], upto: int) -> list[str]:
    """After round `upto` of membership changes: each team's members and seats, and each
    member's access, as the model has them at that point (the batches before it settled)."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        found = _members(scenario, conn, teams, upto)
        expected = scenario.access(upto)
        rows = conn.execute(
            "select id::text as id, has_access from public.profiles where id::text = any(%s)",
            (list(expected),),
        ).fetchall()
    actual = {r["id"]: r["has_access"] for r in rows}
    found += [
        f"access of {user}: expected {expected[user]}, found {actual.get(user)}"
        for user in sorted(expected)
        if expected[user] != actual.get(user)
    ]
    return [f"after membership round {upto}: {line}" for line in found]


def _account(owner: str | None, team: int | None) -> str:
    return f"team {team}" if team is not None else f"user {owner}"


def _members(
    scenario: Scenario,
    conn: psycopg.Connection[dict[str, Any]],
    teams: dict[int, str],
    upto: int | None = None,
) -> list[str]:
    """Each team's members, in their roles, and who holds a seat: owners, then admins, then
    members by when they joined, up to the seats of an active per-seat subscription."""
    expected = scenario.members(upto)
    numbers = {team_id: number for number, team_id in teams.items()}
    rows = conn.execute(
        "select team_id::text as team, user_id::text as user, role, has_seat"
        " from public.team_members where team_id::text = any(%s)",
        (list(numbers),),
    ).fetchall()
    actual = {(numbers[r["team"]], r["user"]): (r["role"], r["has_seat"]) for r in rows}
    return [
        f"team {team} member {user} (role, seat): expected {expected.get((team, user))},"
        f" found {actual.get((team, user))}"
        for team, user in sorted(expected.keys() | actual.keys())
        if expected.get((team, user)) != actual.get((team, user))
    ]


def access_outcomes(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The access subscriber's ledger: each Stripe event it recorded, with its outcome."""
    with conn.cursor(row_factory=tuple_row) as cursor:
        rows = cursor.execute(
            "select event_id, outcome from public.processed_events where consumer = 'access'"
        ).fetchall()
    return dict(rows)


def _ledger(scenario: Scenario, outcomes: dict[str, str]) -> list[str]:
    """Each event of a linked customer recorded by `access` once, and settled (those that change
    nothing, such as a failed payment, as ignored); each customer's newest change applied."""
    expected = {e.event_id for e in scenario.events if e.customer.user_id is not None}
    found = [f"access ledger: {e} not recorded" for e in sorted(expected - outcomes.keys())]
    unexpected = sorted(outcomes.keys() - expected)
    found += [f"access ledger: {e} recorded, unexpected" for e in unexpected]
    found += [f"access ledger: {e} left pending" for e, o in outcomes.items() if o == "pending"]
    found += [
        f"access ledger: {e}, the newest change, {outcomes.get(e)}"
        for e in sorted(scenario.newest_changes())
        if "stale" in outcomes.get(e, "stale")
    ]
    return found


def _emails(
    scenario: Scenario,
    conn: psycopg.Connection[dict[str, Any]],
    resend: FakeResend,
    outcomes: dict[str, str],
) -> list[str]:
    """Each (event, kind) e-mail delivered by Resend exactly once, to the right person, and
    recorded once in `sent_emails`; one about access only if access applied the change.

    A balance's credits-low warning follows the run's consumptions, not the model: only its
    single delivery is checked here. A team's own e-mails (its invitations, the seats its
    members lose and get back) are not Stripe's: the run waits for each invitation's
    (tests/faultrun/members.py), and the seats' depend on the order membership changes and
    events met in, so only their single delivery is checked here."""
    expected = scenario.emails(outcomes)
    sent = list(zip(resend.delivered_keys, resend.delivered, strict=False))  # still growing
    keys = Counter(key for key, _ in sent)
    found = [f"e-mail {k} delivered {n} times" for k, n in keys.items() if n != 1]
    delivered = {
        (key, kind, ",".join(message["to"]))
        for key, message in sent
        if key is not None
        and not (kind := key.rsplit("/", 1)[1]).startswith(TEAM_MAIL)
        and kind != CREDITS_LOW
    }
    found += [f"e-mail {e} never delivered" for e in sorted(expected - delivered)]
    found += [f"e-mail {e} delivered, unexpected" for e in sorted(delivered - expected)]
    rows = conn.execute(
        "select event_id || '/' || kind as key, kind, recipient from public.sent_emails"
        " where kind not like %s and kind <> %s",
        (TEAM_MAIL + "%", CREDITS_LOW),
    ).fetchall()
    recorded = Counter((r["key"], r["kind"], r["recipient"]) for r in rows)
    found += [f"sent_emails: {e} recorded {n} times" for e, n in recorded.items() if n != 1]
    found += [f"sent_emails: {e} missing" for e in sorted(expected - recorded.keys())]
    found += [f"sent_emails: {e} unexpected" for e in sorted(recorded.keys() - expected)]
    return found


def _dead_letters(
    scenario: Scenario,
    dead: DeadLetters,
    accepted: Counter[str],
    access: str,
    outcomes: dict[str, str],
) -> list[str]:
    """Every dead letter explained, and every message that had to end there did (a replay
    sends some there again). A message ends there whole: an event that went with one that had
    to must have been applied (its redeliveries were duplicates)."""
    reasons = scenario.dead_letters()
    found = []
    for source, ids in dead.messages:
        if source != access or not any(event_id in reasons for event_id in ids):
            found.append(f"dead letter from {source}: {' '.join(ids)} unexplained")
            continue
        found += [
            f"dead letter from {source}: {event_id} went with {' '.join(ids)}, never applied"
            for event_id in ids
            if event_id not in reasons and outcomes.get(event_id, "pending") == "pending"
        ]
    found += [
        f"dead letters of {event_id}: {dead.found[(access, event_id)]} of {accepted[event_id]}"
        for event_id in reasons
        if dead.found[(access, event_id)] < accepted[event_id]
    ]
    return found
