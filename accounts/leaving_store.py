"""Leaving in Postgres: what is stored about a person (for their export), the deletion record
and the writes of its steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from accounts.leaving_rules import PURCHASE_FIELDS_CLEARED, DeletionPlan, TeamMembership
from adapters.db.pool import Database, Statement
from teams import store as team_store


def export_of(db: Database, user_id: str, email: str | None) -> dict[str, Any]:
    """Every row about the person, as the export shows it: their own rows, and of their teams
    only the team and their own membership (never another member, an invitation's token or a
    teammate's purchase). `email` finds what only their address names (leads, mails sent)."""
    one = {"u": user_id, "e": email or ""}
    [profile, accounts, grants, purchases, github, teams, team_github, emails, leads] = db.run(
        [
            Statement(
                "select id::text, email, name, customer_id, price_id, has_access, is_admin,"
                " created_at, updated_at from public.profiles where id = %(u)s",
                one,
            ),
            Statement(
                "select a.id::text, a.kind, a.customer_id, a.price_id, a.has_access,"
                " a.created_at, array(select c.customer_id from public.stripe_customers c"
                " where c.account_id = a.id order by c.customer_id) as stripe_customers"
                " from public.accounts a where a.kind = 'personal' and a.owner_id = %(u)s",
                one,
            ),
            Statement(
                "select e.id::text, e.kind, e.price_id, e.status, e.active,"
                " e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at,"
                " e.created_at from public.entitlements e join public.accounts a"
                " on a.id = e.account_id where a.kind = 'personal' and a.owner_id = %(u)s"
                " order by e.created_at",
                one,
            ),
            Statement(
                # What they bought, on their own account or paying for a team: who paid is them.
                "select p.id::text, p.account_id::text, pr.name as product_name,"
                " p.stripe_checkout_session_id, p.stripe_customer_id, p.customer_email,"
                " p.amount_total, p.currency, p.paid, p.amount_refunded, p.refunded_at,"
                " p.quantity, p.created_at from public.purchases p"
                " left join public.products pr on pr.id = p.product_id"
                " where p.user_id = %(u)s or p.account_id in (select a.id from public.accounts a"
                " where a.kind = 'personal' and a.owner_id = %(u)s) order by p.created_at",
                one,
            ),
            Statement(
                "select g.purchase_id::text, g.github_username, g.granted_at"
                " from public.github_grants g where g.user_id = %(u)s order by g.granted_at",
                one,
            ),
            Statement(
                "select t.id::text, t.name, m.role, m.joined_at, m.has_seat"
                " from public.team_members m join public.teams t on t.id = m.team_id"
                " where m.user_id = %(u)s order by m.joined_at",
                one,
            ),
            Statement(
                "select g.team_id::text, g.repository, g.github_username, g.granted_at,"
                " g.removed_at from public.team_github_grants g where g.user_id = %(u)s",
                one,
            ),
            Statement(
                "select s.kind, s.event_id, s.sent_at from public.sent_emails s"
                " where %(e)s <> '' and lower(s.recipient) = lower(%(e)s) order by s.sent_at",
                one,
            ),
            Statement(
                "select l.email, l.created_at from public.leads l"
                " where %(e)s <> '' and lower(l.email) = lower(%(e)s)",
                one,
            ),
        ]
    )
    return {
        "profile": profile[0] if profile else None,
        "accounts": accounts,
        "grants": grants,
        "purchases": purchases,
        "githubGrants": github,
        "teams": teams,
        "teamGithubGrants": team_github,
        "emailsSent": emails,
        "leads": leads,
    }


# A person whose account deletion is under way (recorded, not finished) is leaving: the teams'
# counts leave them out, as if they had gone, so that two owners leaving at once are two owners
# gone (`record` counts under the teams' locks).
_LEAVING = (
    "exists (select 1 from public.account_deletions d"
    " where d.user_id = o.user_id and d.finished_at is null and o.user_id <> m.user_id)"
)
_MEMBERSHIPS = (
    "select t.id::text as team_id, t.name, m.role,"  # noqa: S608 - constant
    " (select count(*) from public.team_members o where o.team_id = t.id"
    f"  and o.role = 'owner' and not {_LEAVING}) as owners,"
    " (select count(*) from public.team_members o where o.team_id = t.id"
    f"  and not {_LEAVING}) as members"
    " from public.team_members m join public.teams t on t.id = m.team_id"
    " where m.user_id = %s order by m.joined_at"
)


def memberships(db: Database, user_id: str) -> list[TeamMembership]:
    """The person's teams, with how many owners and members each has who are not leaving."""
    return [_membership(r) for r in db.fetch_all(_MEMBERSHIPS, (user_id,))]


def _membership(row: dict[str, Any]) -> TeamMembership:
    return TeamMembership(
        row["team_id"], row["name"], row["role"], int(row["owners"]), int(row["members"])
    )


def plan_facts(
    db: Database, user_id: str, closed_teams: Sequence[str]
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """The active subscriptions, repository grants and Stripe customers of the person's own
    account and of the teams that close with it."""
    one = {"u": user_id, "t": list(closed_teams)}
    accounts = (
        "(select a.id from public.accounts a where (a.kind = 'personal' and a.owner_id = %(u)s)"
        " or a.id = any(%(t)s::uuid[]))"
    )
    [subscriptions, repositories, customers] = db.run(
        [
            Statement(
                "select e.source_id from public.entitlements e where e.kind = 'subscription'"  # noqa: S608 - constant
                f" and e.active and e.account_id in {accounts} order by e.source_id",
                one,
            ),
            Statement(
                "select pr.github_repo as repository, g.github_username as login"
                " from public.github_grants g join public.purchases p on p.id = g.purchase_id"
                " join public.products pr on pr.id = p.product_id"
                " where g.user_id = %(u)s and pr.github_repo is not null"
                " union select g.repository, g.github_username from public.team_github_grants g"
                " where g.user_id = %(u)s and g.removed_at is null order by 1, 2",
                one,
            ),
            Statement(
                "select c.customer_id from public.stripe_customers c"  # noqa: S608 - constant
                f" where c.account_id in {accounts} order by c.customer_id",
                one,
            ),
        ]
    )
    return (
        [r["source_id"] for r in subscriptions],
        [(r["repository"], r["login"]) for r in repositories],
        [r["customer_id"] for r in customers],
    )


@dataclass(frozen=True)
class Deletion:
    id: str
    user_id: str
    email: str | None
    plan: DeletionPlan
    steps_done: list[str]
    finished: bool
    redaction_jobs: dict[str, str]  # Stripe customer -> the redaction job asked for it


def open_deletion(db: Database, user_id: str) -> Deletion | None:
    """The person's deletion under way, if any."""
    rows = db.fetch_all(
        "select * from public.account_deletions where user_id = %s and finished_at is null",
        (user_id,),
    )
    return _deletion(rows[0]) if rows else None


def by_id(db: Database, deletion_id: str) -> Deletion | None:
    rows = db.fetch_all("select * from public.account_deletions where id = %s", (deletion_id,))
    return _deletion(rows[0]) if rows else None


def unfinished(db: Database) -> list[Deletion]:
    """Every deletion not finished yet, oldest first (for the resume command)."""
    rows = db.fetch_all(
        "select * from public.account_deletions where finished_at is null order by requested_at"
    )
    return [_deletion(r) for r in rows]


class Held(Exception):
    """The person may not go: `team` would be left without an owner (accounts/leaving_rules.py)."""

    def __init__(self, team: TeamMembership) -> None:
        super().__init__(f"the last owner of the team {team.team_id}")
        self.team = team


def record(
    db: Database,
    *,
    user_id: str,
    plan: DeletionPlan,
    holds: Callable[[Sequence[TeamMembership]], TeamMembership | None],
) -> Deletion:
    """The deletion, recorded before any step; the one under way when there is one already.
    Raises Held, recording nothing, when `holds` finds a team the person may not leave, asked
    with the person's teams locked (their account rows, in id order, as every writer of a team
    takes them first) and counted under that lock: of two owners leaving at once, the second
    counts the first as gone."""
    with db.transaction() as conn:
        conn.execute(
            "select 1 from public.accounts a where a.kind = 'team' and a.id in ("
            " select m.team_id from public.team_members m where m.user_id = %s)"
            " order by a.id for update",
            (user_id,),
        )
        teams = [_membership(r) for r in conn.execute(_MEMBERSHIPS, (user_id,)).fetchall()]
        if (held := holds(teams)) is not None:
            raise Held(held)
        conn.execute(
            "insert into public.account_deletions (user_id, email, plan) values (%s, %s, %s)"
            " on conflict (user_id) where finished_at is null do nothing",
            (user_id, plan.email, Jsonb(plan.as_json())),
        )
        row = conn.execute(
            "select * from public.account_deletions where user_id = %s and finished_at is null",
            (user_id,),
        ).fetchone()
    assert row is not None
    return _deletion(row)


# Longer than the steps take (each outside call gives up after OUTBOUND_TIMEOUT_SECONDS).
LEASE_SECONDS = 120


def take(db: Database, deletion_id: str) -> Deletion | None:
    """Hold the deletion while this call runs its steps, and read it as it stands now; None
    while another call holds it (or it finished meanwhile)."""
    with db.transaction() as conn:
        row = conn.execute(
            "update public.account_deletions"
            " set running_until = now() + make_interval(secs => %s)"
            " where id = %s and finished_at is null"
            " and (running_until is null or running_until < now())"
            " returning *",
            (LEASE_SECONDS, deletion_id),
        ).fetchone()
    return _deletion(row) if row else None


def running(db: Database, deletion_id: str) -> bool:
    """Whether a call holds the deletion now (its lease not run out)."""
    rows = db.fetch_all(
        "select 1 from public.account_deletions where id = %s and running_until > now()",
        (deletion_id,),
    )
    return bool(rows)


def release(db: Database, deletion_id: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.account_deletions set running_until = null where id = %s",
            (deletion_id,),
        )


def mark_done(db: Database, deletion_id: str, step: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.account_deletions set steps_done = array_append(steps_done, %s),"
            " last_error = null where id = %s and not (%s = any(steps_done))",
            (step, deletion_id, step),
        )


def mark_failed(db: Database, deletion_id: str, error: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.account_deletions set last_error = %s where id = %s",
            (error[:500], deletion_id),
        )


def finish(db: Database, deletion_id: str) -> None:
    """Finished: the record keeps who, when and the steps, no longer the address or the plan."""
    with db.transaction() as conn:
        conn.execute(
            "update public.account_deletions set finished_at = now(), email = null,"
            " plan = '{}'::jsonb, last_error = null where id = %s and finished_at is null",
            (deletion_id,),
        )


def record_redaction_job(db: Database, deletion_id: str, customer_id: str, job_id: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.account_deletions set plan = jsonb_set(plan, '{redaction_jobs}',"
            " coalesce(plan -> 'redaction_jobs', '{}'::jsonb) || jsonb_build_object(%s::text,"
            " %s::text)) where id = %s",
            (customer_id, job_id, deletion_id),
        )


def add_founder_task(
    db: Database, *, kind: str, subject: str, detail: str, deletion_id: str | None
) -> None:
    """A task for the founder, once per (kind, subject)."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.founder_tasks (kind, subject, detail, deletion_id)"
            " values (%s, %s, %s, %s) on conflict (kind, subject) do nothing",
            (kind, subject, detail, deletion_id),
        )


_TASK = (
    "json_build_object('id', id, 'kind', kind, 'subject', subject, 'detail', detail,"
    " 'deletionId', deletion_id, 'createdAt', created_at, 'doneAt', done_at)"
)


def open_founder_tasks(db: Database) -> list[dict[str, Any]]:
    """The tasks not done yet, oldest first."""
    rows = db.fetch_all(
        f"select {_TASK} as task from public.founder_tasks"  # noqa: S608 - constant
        " where done_at is null order by created_at, id"
    )
    return [r["task"] for r in rows]


def finish_founder_task(db: Database, task_id: str) -> dict[str, Any] | None:
    """The task marked done (once: done again, it keeps its first time); None if unknown."""
    with db.transaction() as conn:
        done = (
            "update public.founder_tasks set done_at = coalesce(done_at, now())"  # noqa: S608
            f" where id = %s returning {_TASK} as task"
        )
        row = conn.execute(done, (task_id,)).fetchone()
    return row["task"] if row else None


def leave_team(db: Database, team_id: str, user_id: str) -> bool:
    """Take the person out of a team that goes on; its seats are given out again. False when
    they were no longer in it. A team they created names its longest-standing owner as its
    account's `owner_id` instead (the column cascades from the profile: left naming them, the
    team would go with their account)."""
    with db.transaction() as conn:
        team_store.lock(conn, team_id)
        left = team_store.role_of(conn, team_id, user_id) is not None
        if left:
            team_store.remove(conn, team_id, user_id)
        conn.execute(
            "update public.accounts a set owner_id = (select m.user_id"
            " from public.team_members m where m.team_id = a.id order by"
            " case m.role when 'owner' then 0 when 'admin' then 1 else 2 end, m.joined_at"
            " limit 1) where a.id = %s and a.kind = 'team' and a.owner_id = %s",
            (team_id, user_id),
        )
    return left


# The Stripe customers of a person's own account, or of a team's, recorded as erased before the
# account goes: Stripe still sends their events, which the access cycle then settles.
ERASE_CUSTOMERS = (
    "insert into public.erased_customers (customer_id) select c.customer_id"
    " from public.stripe_customers c join public.accounts a on a.id = c.account_id"
    " where (a.kind = 'personal' and a.owner_id = %s::uuid) or a.id = %s::uuid"
    " on conflict do nothing"
)


def close_team(db: Database, team_id: str) -> None:
    """A team its last member leaves with their account: its account goes (its grants and
    members with it); its purchases stay for the books, without the account."""
    with db.transaction() as conn:
        conn.execute(ERASE_CUSTOMERS, (None, team_id))
        conn.execute(
            "update public.purchases set account_id = null where account_id = %s", (team_id,)
        )
        conn.execute("delete from public.accounts where id = %s and kind = 'team'", (team_id,))


def erase_personal_data(
    db: Database, user_id: str, email: str | None, teams: Sequence[str]
) -> None:
    """In one transaction: their purchases (their own account's, and what they paid for the
    teams that closed) kept without what names them; their leads, the invitations sent to
    their address (pending or accepted) and the addresses of the mails sent to them gone;
    their profile's name and address cleared (the profile itself goes with their auth user)."""
    cleared = ", ".join(f"{name} = null" for name in PURCHASE_FIELDS_CLEARED)
    with db.transaction() as conn:
        # Their own account's Stripe customers, whose events the access cycle settles once the
        # account went with their auth user (a closed team's: `close_team`).
        conn.execute(ERASE_CUSTOMERS, (user_id, None))
        conn.execute(
            f"update public.purchases set {cleared} where user_id = %(u)s"  # noqa: S608 - constant
            " or account_id in (select a.id from public.accounts a where a.kind = 'personal'"
            " and a.owner_id = %(u)s) or account_id = any(%(t)s::uuid[])",
            {"u": user_id, "t": list(teams)},
        )
        if email:
            conn.execute("delete from public.leads where lower(email) = lower(%s)", (email,))
            conn.execute(
                "delete from public.team_invitations where lower(email) = lower(%s)", (email,)
            )
            conn.execute(
                "update public.sent_emails set recipient = '' where lower(recipient) = lower(%s)",
                (email,),
            )
            conn.execute(
                "update public.email_resends set recipient = '' where lower(recipient) = lower(%s)",
                (email,),
            )
        conn.execute(
            "update public.profiles set email = null, name = null where id = %s", (user_id,)
        )


def _deletion(row: dict[str, Any]) -> Deletion:
    plan = row["plan"] or {}
    return Deletion(
        id=str(row["id"]),
        user_id=str(row["user_id"]),
        email=row["email"],
        plan=DeletionPlan.from_json(plan),
        steps_done=list(row["steps_done"]),
        finished=row["finished_at"] is not None,
        redaction_jobs=dict(plan.get("redaction_jobs") or {}),
    )
