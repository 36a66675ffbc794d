"""Teams in Postgres: the team (an account of kind `team` with a name), its members and its
invitations, as the service role.

Every change to who is a member, in what role, or to a team's seats ends, in the same
transaction, with `public.team_refresh` (seats given out again, each member's change recorded in
`team_seat_changes`, the members' profile mirrors recomputed) and `public.access_refresh` for
anyone who left: `_refreshed` is that one step. Who is told of a seat change reads the record
(`untold_seat_changes`), whoever made the change: a route or Stripe's event.

Every change first takes `public.team_lock`: the team's account row, its `teams` row, then the
personal accounts of its members in id order, the order the access cycle's `access_claim` takes
too (team accounts before personal ones), so the two wait for each other and never deadlock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from adapters.db.pool import Connection, Database
from teams.rules import Invitation, Refusal, Role, SeatChange, SeatCount


@dataclass(frozen=True)
class Team:
    id: str
    name: str
    role: Role  # the caller's
    has_access: bool  # the caller's through the team: its account's access, and a seat
    has_seat: bool  # the caller's


@dataclass(frozen=True)
class MemberRow:
    user_id: str
    email: str | None
    name: str | None
    role: Role
    has_seat: bool
    joined_at: datetime


@dataclass(frozen=True)
class InvitationRow:
    id: str
    email: str
    role: Role
    expires_at: datetime


class NoSeat(Exception):
    def __init__(self, seats: SeatCount) -> None:
        super().__init__(f"no seat left of {seats.total}")
        self.seats = seats


class DailyLimit(Exception):
    """The team (`whose` "team") or the person sending (`whose` "sender", across all their
    teams) sent `limit` invitation mails in the last 24 hours; one more may go in
    `retry_after`."""

    def __init__(
        self, whose: Literal["team", "sender"], limit: int, retry_after: timedelta
    ) -> None:
        super().__init__(f"{limit} invitation mails of the {whose} in 24 hours")
        self.whose = whose
        self.limit = limit
        self.retry_after = retry_after


# A member has the team's access only while they hold one of its seats (as
# public.access_accounts counts it): `has_access` is theirs, not the team account's.
_TEAMS_OF = (
    "select t.id::text as id, t.name, m.role, a.has_access and m.has_seat as has_access,"
    " m.has_seat"
    " from public.team_members m join public.teams t on t.id = m.team_id"
    " join public.accounts a on a.id = t.id"
)


def create(db: Database, *, owner_id: str, name: str) -> Team:
    """A new team, its account, and its first member: the owner."""
    with db.transaction() as conn:
        row = conn.execute(
            "with account as (insert into public.accounts (kind, owner_id) values ('team', %s)"
            " returning id), team as (insert into public.teams (id, name, named_by)"
            " select id, %s, %s from account returning id)"
            " insert into public.team_members (team_id, user_id, role)"
            " select id, %s, 'owner' from team returning team_id::text as id",
            (owner_id, name, owner_id, owner_id),
        ).fetchone()
        assert row is not None
        _refreshed(conn, row["id"])
    return Team(id=row["id"], name=name, role="owner", has_access=False, has_seat=True)


def of_user(db: Database, user_id: str) -> list[Team]:
    """The teams the user is a member of, oldest membership first."""
    rows = db.fetch_all(
        _TEAMS_OF + " where m.user_id = %s::uuid order by m.joined_at, t.id", (user_id,)
    )
    return [Team(**row) for row in rows]


def membership(db: Database, team_id: str, user_id: str) -> Team | None:
    """The team as this user sees it, if they are a member."""
    rows = db.fetch_all(
        _TEAMS_OF + " where m.team_id = %s::uuid and m.user_id = %s::uuid", (team_id, user_id)
    )
    return Team(**rows[0]) if rows else None


def members(db: Database, team_id: str) -> list[MemberRow]:
    rows = db.fetch_all(
        "select m.user_id::text as user_id, p.email, p.name, m.role, m.has_seat, m.joined_at"
        " from public.team_members m join public.profiles p on p.id = m.user_id"
        " where m.team_id = %s::uuid order by m.joined_at, m.user_id",
        (team_id,),
    )
    return [MemberRow(**row) for row in rows]


def pending_invitations(db: Database, team_id: str) -> list[InvitationRow]:
    rows = db.fetch_all(
        "select id::text as id, email, role, expires_at from public.team_invitations"
        " where team_id = %s::uuid"
        " and accepted_at is null and revoked_at is null and expires_at > now()"
        " order by created_at, id",
        (team_id,),
    )
    return [InvitationRow(**row) for row in rows]


# The seats a team has (`public.team_seats`, as public.team_refresh gives them out: its
# subscription's quantity and its lifetime seats), none (no limit) without per-seat grants.
_SEATS = (
    "select public.team_seats(t.id) as total,"
    " (select count(*) from public.team_members m where m.team_id = t.id)"
    " + (select count(*) from public.team_invitations i where i.team_id = t.id"
    " and i.accepted_at is null and i.revoked_at is null and i.expires_at > now())"
    " as used from public.teams t where t.id = %s::uuid"
)


def seats(db: Database | Connection, team_id: str) -> SeatCount | None:
    """The team's seats and how many are used; None when it sells none."""
    if isinstance(db, Database):
        rows = db.fetch_all(_SEATS, (team_id,))
    else:
        rows = list(db.execute(_SEATS, (team_id,)).fetchall())
    if not rows or rows[0]["total"] is None:
        return None
    return SeatCount(total=int(rows[0]["total"]), used=int(rows[0]["used"]))


def subscription(db: Database, team_id: str) -> str | None:
    """The team's active per-seat subscription, whose quantity its seats follow."""
    rows = db.fetch_all(
        "select e.source_id from public.entitlements e"
        " join public.products pr on pr.stripe_price_id = e.price_id"
        " where e.account_id = %s::uuid and e.active and pr.per_seat and e.kind = 'subscription'"
        " order by e.changed_at desc nulls last limit 1",
        (team_id,),
    )
    return str(rows[0]["source_id"]) if rows else None


def customer(db: Database, team_id: str) -> str | None:
    rows = db.fetch_all(
        "select customer_id from public.accounts where id = %s::uuid and kind = 'team'",
        (team_id,),
    )
    return rows[0]["customer_id"] if rows else None


def invite(
    db: Database,
    *,
    team_id: str,
    email: str,
    role: str,
    token_hash: str,
    invited_by: str,
    expires_at: datetime,
    daily_limit: int,
    sender_limit: int,
    inviting: Callable[[str | None], Refusal | None],
) -> InvitationRow:
    """A new invitation, unless `inviting`, asked with the team held and `invited_by`'s role in
    it read under that hold (None: no longer a member), refuses it (Refused), the team sent
    `daily_limit` invitation mails in the last 24 hours, or `invited_by` sent `sender_limit`
    from all their teams (DailyLimit), or its seats are all used (NoSeat); a pending invitation
    to the same address is replaced (its link stops working). Its mail is counted."""
    with db.transaction() as conn:
        _lock(conn, team_id, [invited_by])
        if (refusal := inviting(role_of(conn, team_id, invited_by))) is not None:
            raise Refused(refusal)
        _count_mail(conn, team_id, invited_by, daily_limit, sender_limit)
        conn.execute(
            "update public.team_invitations set revoked_at = now()"
            " where team_id = %s and lower(email) = lower(%s)"
            " and accepted_at is null and revoked_at is null and expires_at > now()",
            (team_id, email),
        )
        found = seats(conn, team_id)
        if found is not None and found.used >= found.total:
            raise NoSeat(found)
        row = conn.execute(
            "insert into public.team_invitations (team_id, email, role, token_hash, invited_by,"
            " expires_at) values (%s, %s, %s, %s, %s, %s)"
            " returning id::text as id, email, role, expires_at",
            (team_id, email, role, token_hash, invited_by, expires_at),
        ).fetchone()
    assert row is not None
    return InvitationRow(**row)


def revoke(db: Database, *, team_id: str, invitation_id: str) -> bool:
    with db.transaction() as conn:
        row = conn.execute(
            "update public.team_invitations set revoked_at = now()"
            " where team_id = %s and id = %s"
            " and accepted_at is null and revoked_at is null and expires_at > now() returning id",
            (team_id, invitation_id),
        ).fetchone()
    return row is not None


def renew(
    db: Database,
    *,
    team_id: str,
    invitation_id: str,
    token_hash: str,
    expires_at: datetime,
    sent_by: str,
    daily_limit: int,
    sender_limit: int,
) -> InvitationRow | None:
    """A pending invitation with a new token (the old one is dead) and a new expiry, its mail
    counted as a new invitation's is (DailyLimit past `daily_limit` of the team or
    `sender_limit` of `sent_by`). An expired one held no seat: it takes one again, unless the
    team's seats are all used (NoSeat); an unexpired one keeps its own."""
    with db.transaction() as conn:
        _lock(conn, team_id, [sent_by])
        found = conn.execute(
            "select expires_at <= now() as expired from public.team_invitations"
            " where team_id = %s and id = %s and accepted_at is null and revoked_at is null",
            (team_id, invitation_id),
        ).fetchone()
        if found is None:
            return None
        _count_mail(conn, team_id, sent_by, daily_limit, sender_limit)
        if found["expired"]:
            taken = seats(conn, team_id)
            if taken is not None and taken.used >= taken.total:
                raise NoSeat(taken)
        row = conn.execute(
            "update public.team_invitations set token_hash = %s, expires_at = %s"
            " where team_id = %s and id = %s and accepted_at is null and revoked_at is null"
            " returning id::text as id, email, role, expires_at",
            (token_hash, expires_at, team_id, invitation_id),
        ).fetchone()
    return InvitationRow(**row) if row else None


def invitation_by_hash(db: Database, token_hash: str) -> Invitation | None:
    rows = db.fetch_all(
        "select team_id::text as team_id, email, role, expires_at, accepted_at, revoked_at"
        " from public.team_invitations where token_hash = %s",
        (token_hash,),
    )
    return Invitation(**rows[0]) if rows else None


@dataclass(frozen=True)
class Invited:
    """What an invitation's link tells its holder: the team, the role, who sent it."""

    team_name: str
    role: str
    expires_at: datetime
    inviter_email: str | None  # None: the sender's account is gone
    inviter_name: str | None


def invited(db: Database, token_hash: str) -> Invited | None:
    rows = db.fetch_all(
        "select t.name as team_name, i.role, i.expires_at, p.email as inviter_email,"
        " p.name as inviter_name from public.team_invitations i"
        " join public.teams t on t.id = i.team_id"
        " left join public.profiles p on p.id = i.invited_by where i.token_hash = %s",
        (token_hash,),
    )
    return Invited(**rows[0]) if rows else None


class Refused(Exception):
    """A rule of teams/rules.py, asked with the team held, refused the change."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def accept(
    db: Database,
    *,
    team_id: str,
    token_hash: str,
    user_id: str,
    joining: Callable[[int], Refusal | None],
) -> Invitation:
    """Use the invitation (the team locked first, as every team change does: two acceptances
    cannot both succeed) and make the user a member in its role (a member already keeps their
    role). Raises LookupError when it is no longer pending, Refused when `joining`, asked with
    the team's staying owners counted under the lock, refuses it (nothing changed)."""
    with db.transaction() as conn:
        _lock(conn, team_id, [user_id])
        if (refusal := joining(owners(conn, team_id))) is not None:
            raise Refused(refusal)
        row = conn.execute(
            "update public.team_invitations set accepted_at = now()"
            " where token_hash = %s and team_id = %s"
            " and accepted_at is null and revoked_at is null and expires_at > now()"
            " returning team_id::text as team_id, email, role, expires_at, accepted_at,"
            " revoked_at",
            (token_hash, team_id),
        ).fetchone()
        if row is None:
            raise LookupError("invitation no longer pending")
        invitation = Invitation(**row)
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, %s)"
            " on conflict (team_id, user_id) do nothing",
            (invitation.team_id, user_id, invitation.role),
        )
        _refreshed(conn, invitation.team_id)
    return invitation


def owners(conn: Connection, team_id: str) -> int:
    """The team's owners who stay: one whose account deletion is under way is leaving, so no
    other owner may step down or leave on the strength of them."""
    row = conn.execute(
        "select count(*) as n from public.team_members m where m.team_id = %s"
        " and m.role = 'owner' and not exists (select 1 from public.account_deletions d"
        " where d.user_id = m.user_id and d.finished_at is null)",
        (team_id,),
    ).fetchone()
    return int(row["n"]) if row else 0


def role_of(conn: Connection, team_id: str, user_id: str) -> str | None:
    row = conn.execute(
        "select role from public.team_members where team_id = %s and user_id = %s",
        (team_id, user_id),
    ).fetchone()
    return str(row["role"]) if row else None


def lock(conn: Connection, team_id: str) -> None:
    """Hold the team while a change is checked and made: membership changes go one at a time."""
    _lock(conn, team_id)


def remove(conn: Connection, team_id: str, user_id: str) -> None:
    conn.execute(
        "delete from public.team_members where team_id = %s and user_id = %s", (team_id, user_id)
    )
    _refreshed(conn, team_id, left=[user_id])


def set_role(conn: Connection, team_id: str, user_id: str, role: str) -> None:
    conn.execute(
        "update public.team_members set role = %s where team_id = %s and user_id = %s",
        (role, team_id, user_id),
    )
    _refreshed(conn, team_id)


def set_quantity(db: Database, team_id: str, quantity: int) -> None:
    """The seats Stripe now bills for, before its event says so (the event sets the same; a
    trigger gives the seats out again)."""
    with db.transaction() as conn:
        _lock(conn, team_id)
        conn.execute("update public.teams set quantity = %s where id = %s", (quantity, team_id))


def _count_mail(
    conn: Connection, team_id: str, sender: str, team_limit: int, sender_limit: int
) -> None:
    """Count one more invitation mail of the team and of its sender (both held by the caller's
    `_lock`: the team's rows, and the sender's own account, which every team of theirs locks
    too), or raise DailyLimit when `team_limit` of the team's, or `sender_limit` of the
    sender's from any team, went out in the last 24 hours: the next may go once the
    limit-th newest of them is 24 hours old. Nothing is written when either is reached."""
    conn.execute(
        "delete from public.team_invitation_mails"
        " where (team_id = %s or sent_by = %s) and sent_at <= now() - interval '24 hours'",
        (team_id, sender),
    )
    counts: tuple[tuple[Literal["team", "sender"], str, str, int], ...] = (
        ("team", "team_id", team_id, team_limit),
        ("sender", "sent_by", sender, sender_limit),
    )
    for whose, column, key, limit in counts:
        full = conn.execute(
            "select extract(epoch from sent_at + interval '24 hours' - now()) as wait"  # noqa: S608 - constant
            f" from public.team_invitation_mails where {column} = %s"
            " order by sent_at desc offset %s limit 1",
            (key, limit - 1),
        ).fetchone()
        if full is not None:
            wait = timedelta(seconds=max(float(full["wait"]), 1.0))
            raise DailyLimit(whose, limit, wait)
    conn.execute(
        "insert into public.team_invitation_mails (team_id, sent_by) values (%s, %s)",
        (team_id, sender),
    )


def _lock(conn: Connection, team_id: str, users: Sequence[str] = ()) -> None:
    """The team's account, the team, and its members' (and `users`') personal accounts, in the
    one order every writer of a team takes them."""
    conn.execute("select public.team_lock(%s::uuid, %s::uuid[])", (team_id, list(users)))


def _refreshed(conn: Connection, team_id: str, *, left: Sequence[str] = ()) -> None:
    """SeatCount given out again and every affected mirror recomputed (the members', and those who
    left), in the caller's transaction."""
    conn.execute(
        "select public.team_refresh(%s::uuid), public.access_refresh(%s::uuid[])",
        (team_id, list(left)),
    )


def names(db: Database, user_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The e-mail address and name of each of these people."""
    rows = db.fetch_all(
        "select id::text as id, email, name from public.profiles where id = any(%s::uuid[])",
        (list(user_ids),),
    )
    return {row["id"]: row for row in rows}


@dataclass(frozen=True)
class TeamName:
    """A team's name and who wrote it: its creator (`teams.named_by`; a name is not changed
    after), never the member its account passed to; none once they are gone."""

    name: str
    author_email: str | None
    author_name: str | None


def team_name(db: Database, team_id: str) -> TeamName | None:
    rows = db.fetch_all(
        "select t.name, p.email as author_email, p.name as author_name from public.teams t"
        " left join public.profiles p on p.id = t.named_by where t.id = %s::uuid",
        (team_id,),
    )
    return TeamName(**rows[0]) if rows else None


def sold_per_seat(db: Database, price_id: str) -> bool:
    """Whether the product at this price is sold per seat."""
    rows = db.fetch_all(
        "select per_seat from public.products where stripe_price_id = %s", (price_id,)
    )
    return bool(rows and rows[0]["per_seat"])


def member_count(db: Database, team_id: str) -> int:
    rows = db.fetch_all(
        "select count(*) as n from public.team_members where team_id = %s::uuid", (team_id,)
    )
    return int(rows[0]["n"])


@dataclass(frozen=True)
class TeamRepository:
    team_id: str
    repository: str
    product_name: str


# The repositories a team is entitled to now: its paid, unrefunded purchases of `github`
# products, a subscription's only while the subscription's grant is active.
_ENTITLED_REPOSITORIES = (
    "select pu.account_id as team_id, pr.github_repo as repository, pr.name as product_name"
    " from public.purchases pu join public.products pr on pr.id = pu.product_id"
    " where pu.paid and pu.refunded_at is null"
    " and pr.type = 'github' and pr.github_repo is not null"
    " and (pr.billing_type = 'one_time' or exists (select 1 from public.entitlements e"
    " where e.account_id = pu.account_id and e.active and e.kind = 'subscription'"
    " and e.price_id = pr.stripe_price_id))"
)


def seated_repositories(db: Database, user_id: str, team_id: str | None) -> list[TeamRepository]:
    """The repositories the teams (or this team) where the user holds a seat are entitled to."""
    rows = db.fetch_all(
        "select distinct r.team_id::text as team_id, r.repository, r.product_name"  # noqa: S608
        " from public.team_members m join ("
        + _ENTITLED_REPOSITORIES
        + ") r on r.team_id = m.team_id"
        " where m.user_id = %s::uuid and m.has_seat"
        " and (%s::uuid is null or m.team_id = %s::uuid)"
        " order by 1, 2",
        (user_id, team_id, team_id),
    )
    return [TeamRepository(**row) for row in rows]


@dataclass(frozen=True)
class RepositorySeat:
    """A member's GitHub account on a team's repository: whether it is due (a seat, and the
    team entitled to the repository) and whether it was taken away."""

    user_id: str
    repository: str
    username: str
    due: bool
    removed: bool


def repository_seats(db: Database, team_id: str) -> list[RepositorySeat]:
    rows = db.fetch_all(
        "select g.user_id::text as user_id, g.repository, g.github_username as username,"  # noqa: S608
        " (m.has_seat and exists (select 1 from ("
        + _ENTITLED_REPOSITORIES
        + ") r where r.team_id = g.team_id"
        " and r.repository = g.repository)) as due,"
        " g.removed_at is not null as removed"
        " from public.team_github_grants g join public.team_members m"
        " on m.team_id = g.team_id and m.user_id = g.user_id"
        " where g.team_id = %s::uuid order by g.user_id, g.repository",
        (team_id,),
    )
    return [RepositorySeat(**row) for row in rows]


def mark_repository(
    db: Database, *, team_id: str, user_id: str, repository: str, removed: bool
) -> None:
    """Record that the member's GitHub account was taken off the repository, or put back."""
    with db.transaction() as conn:
        conn.execute(
            "update public.team_github_grants set removed_at = case when %s then now() end"
            " where team_id = %s and user_id = %s and repository = %s",
            (removed, team_id, user_id, repository),
        )


@dataclass(frozen=True)
class SeatNews:
    """A team's seat changes nobody was told of yet, and its members' seats now."""

    changes: list[SeatChange]
    seated: dict[str, bool]
    team_has_access: bool


def untold_seat_changes(db: Database, team_id: str) -> SeatNews:
    # One read, so the changes, the seats and the team's access are of one moment: the union's
    # `has_seat` column is a change's, a member's seat now, or (`team`) the team's access.
    rows = db.fetch_all(
        "select 'change' as what, c.id, c.user_id::text as user_id, c.has_seat"
        " from public.team_seat_changes c where c.team_id = %s::uuid and c.told_at is null"
        " union all select 'member', 0, m.user_id::text, m.has_seat"
        " from public.team_members m where m.team_id = %s::uuid"
        " union all select 'team', 0, null, a.has_access"
        " from public.accounts a where a.id = %s::uuid",
        (team_id, team_id, team_id),
    )
    return SeatNews(
        changes=[
            SeatChange(id=r["id"], user_id=r["user_id"], has_seat=r["has_seat"])
            for r in rows
            if r["what"] == "change"
        ],
        seated={r["user_id"]: r["has_seat"] for r in rows if r["what"] == "member"},
        team_has_access=any(r["has_seat"] for r in rows if r["what"] == "team"),
    )


def mark_told(db: Database, change_ids: Sequence[int]) -> None:
    if not change_ids:
        return
    with db.transaction() as conn:
        conn.execute(
            "update public.team_seat_changes set told_at = now()"
            " where id = any(%s) and told_at is null",
            (list(change_ids),),
        )


def claim_repository(
    db: Database, *, team_id: str, user_id: str, repository: str, username: str
) -> str:
    """Grant the member's seat's access to `username` unless another account holds it; the
    account that holds it."""
    with db.transaction() as conn:
        row = conn.execute(
            "insert into public.team_github_grants (team_id, user_id, repository,"
            " github_username) values (%s, %s, %s, %s)"
            " on conflict (team_id, user_id, repository)"
            # Asked again while the seat is held: the access is back (the caller invites).
            " do update set granted_at = public.team_github_grants.granted_at,"
            " removed_at = case when lower(public.team_github_grants.github_username)"
            " = lower(excluded.github_username) then null"
            " else public.team_github_grants.removed_at end"
            " returning github_username",
            (team_id, user_id, repository, username),
        ).fetchone()
    assert row is not None
    return str(row["github_username"])


def release_repository(db: Database, *, team_id: str, user_id: str, repository: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "delete from public.team_github_grants"
            " where team_id = %s and user_id = %s and repository = %s",
            (team_id, user_id, repository),
        )


def repository_grants(db: Database, team_id: str, user_ids: Sequence[str]) -> list[tuple[str, str]]:
    """The (repository, GitHub account) pairs these people hold through the team."""
    rows = db.fetch_all(
        "select repository, github_username from public.team_github_grants"
        " where team_id = %s::uuid and user_id = any(%s::uuid[])",
        (team_id, list(user_ids)),
    )
    return [(row["repository"], row["github_username"]) for row in rows]
