"""Credits in Postgres: consumptions decided in one statement, balances read.

Every entry point (`POST /api/usage`, `@consumes`, the reserve and settle of an amount known
after the work) takes credits through `take` and `settle` here, which call
`public.credit_take` and `public.credits_settle` (supabase/schemas/credits.sql): the decision and
the consumption are one statement under the grants' row locks, once per idempotency key. Each
is one round trip and safe to send again (the key makes a second run answer the first).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.db.pool import Database
from credits.batches import Consumption, batches_of
from credits.rules import AlertTerms, Answer, Check, CreditEnd, CreditGrant, Credits, Taken

# The access cycle's writes of credits (parts of its one statement: access/store.py).
# A grant's features and amounts are the product's at its price; a source grants each feature
# once, and a paid period older than one already granted for its subscription grants nothing.
# An upgrade's top-up grants the new plan's amount less what the subscription's live period
# grants gave of that feature (nothing when they gave as much), so a period never holds more
# than the highest plan paid for in it.
GRANT = (
    "insert into public.credit_grants (account_id, feature, source, kind, subscription_id,"
    " amount, starts_at, expires_at, event_id)"
    " select v.account_id, c.key, case when p.credits_period = 'once'"
    " then coalesce(v.subscription, v.source) else v.source end, p.credits_period,"
    " v.subscription, n.amount, v.starts_at, case when p.credits_period = 'period'"
    " then v.ends_at else v.starts_at + make_interval(days => p.credits_expire_days) end,"
    " v.event_id"
    " from unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],"
    " %s::timestamptz[], %s::text[], %s::boolean[]) as v(account_id, source, subscription,"
    " price_id, starts_at, ends_at, event_id, top_up)"
    " join public.products p on p.stripe_price_id = v.price_id"
    " cross join lateral jsonb_each_text(p.credits) as c"
    " cross join lateral (select c.value::integer - case when v.top_up then coalesce(("
    " select sum(g.amount) from public.credit_grants g where g.subscription_id = v.subscription"
    " and g.kind = 'period' and g.feature = c.key and g.ended_at is null"
    " and g.expires_at > v.starts_at), 0) else 0 end as amount) as n"
    " where n.amount > 0 and not exists (select 1 from public.credit_grants g"
    " where p.credits_period = 'period'"
    " and g.subscription_id = v.subscription and g.kind = 'period'"
    " and g.starts_at > v.starts_at)"
    " on conflict (source, feature) do nothing"
)
# The next paid period replaces the one before: its unused credits end.
RESET = (
    "update public.credit_grants g set ended_at = v.starts_at"
    " from unnest(%s::text[], %s::timestamptz[]) as v(subscription, starts_at)"
    " where g.subscription_id = v.subscription and g.kind = 'period' and g.ended_at is null"
    " and g.starts_at < v.starts_at"
)
# A subscription's end ends its period credits; a pack's refund what is left of it.
END = (
    "update public.credit_grants g set ended_at = v.at"
    " from unnest(%s::text[], %s::text[], %s::timestamptz[]) as v(subscription, source, at)"
    " where g.ended_at is null and ((g.subscription_id = v.subscription and g.kind = 'period')"
    " or g.source = v.source)"
)


def grant_columns(grants: Sequence[CreditGrant]) -> list[list[Any]]:
    return [
        [g.account_id for g in grants],
        [g.source for g in grants],
        [g.subscription_id for g in grants],
        [g.price_id for g in grants],
        [g.starts_at for g in grants],
        [g.ends_at for g in grants],
        [g.event_id for g in grants],
        [g.top_up for g in grants],
    ]


def reset_columns(grants: Sequence[CreditGrant]) -> list[list[Any]]:
    periods = [g for g in grants if g.subscription_id and not g.top_up]
    return [[g.subscription_id for g in periods], [g.starts_at for g in periods]]


def end_columns(ends: Sequence[CreditEnd]) -> list[list[Any]]:
    return [[e.subscription_id for e in ends], [e.source for e in ends], [e.at for e in ends]]


def take(
    db: Database, account_id: str, feature: str, amount: int, key: str, *, reserve: bool = False
) -> Taken:
    """Consume (or reserve) `amount` credits of `feature` under `key` (with the consumptions
    of this instance in flight at the same moment, in one statement: `credits/batches.py`)."""
    state = "reserved" if reserve else "consumed"
    return _taken(batches_of(db).take(Consumption(account_id, None, feature, amount, key, state)))


def take_for(
    db: Database, user_id: str, feature: str, amount: int, key: str, *, reserve: bool = False
) -> tuple[Taken, str | None]:
    """A person's consumption, the account found in the same statement (`credit_take_for`):
    what it answered and from which account (None: no such person)."""
    state = "reserved" if reserve else "consumed"
    taken = batches_of(db).take(Consumption(None, user_id, feature, amount, key, state))
    account = taken.get("account")
    return _taken(taken), str(account) if account else None


def check(db: Database, account_id: str, feature: str, amount: int) -> Check:
    """Whether the account could take `amount` of `feature` now; reads only."""
    [row] = db.fetch_all(
        "select public.credit_check(%s::uuid, %s, %s) as checked", (account_id, feature, amount)
    )
    return _check(row["checked"])


def check_for(db: Database, user_id: str, feature: str, amount: int) -> Check | None:
    """A person's check, from the pool they would consume from now (None: no such person)."""
    [row] = db.fetch_all(
        "select public.credit_check_for(%s::uuid, %s, %s) as checked", (user_id, feature, amount)
    )
    return None if row["checked"]["state"] == "unknown" else _check(row["checked"])


def _check(answer: Mapping[str, Any]) -> Check:
    return Check(
        feature=answer["feature"],
        allowed=answer["state"] == "allowed",
        balance=int(answer["balance"]),
        overage=int(answer.get("overage") or 0) > 0,
    )


def settle(db: Database, key: str, amount: int, answer: Answer | None = None) -> Taken:
    """A reservation settled at `amount` (the rest given back; 0 releases it whole), with its
    request's answer kept for a request sent again with the key."""
    [row] = db.fetch_all(
        "select public.credits_settle_kept(%s, %s, %s, %s, %s, %s) as taken",
        (
            key,
            amount,
            answer.status if answer else None,
            answer.content_type if answer else None,
            answer.body if answer else None,
            answer.request if answer else None,
        ),
    )
    return _taken(row["taken"])


def answered(db: Database, key: str, answer: Answer) -> bool:
    """Keep the answer of a request whose consumption was settled before it answered (once)."""
    [row] = db.fetch_all(
        "select public.credits_keep_answer(%s, %s, %s, %s, %s) as kept",
        (key, answer.status, answer.content_type, answer.body, answer.request),
    )
    return bool(row["kept"])


def team_account(db: Database, team_id: str) -> str | None:
    """A team's account (a team's id is its account's), when it exists."""
    rows = db.fetch_all(
        "select id from public.accounts where id = %s::uuid and kind = 'team'", (team_id,)
    )
    return str(rows[0]["id"]) if rows else None


def held(db: Database, user_id: str) -> list[Credits]:
    """Every feature's credits the person has, per account they have access through."""
    rows = db.fetch_all("select * from public.credits_held(%s::uuid)", (user_id,))
    return [
        Credits(
            feature=r["feature"],
            balance=r["balance"],
            granted=r["granted"],
            used=r["used"],
            resets_at=r["resets_at"],
            team_id=str(r["team_id"]) if r["team_id"] else None,
            packs=r["packs"],
            packs_expire_at=r["packs_expire_at"],
        )
        for r in rows
    ]


def balance(db: Database, account_id: str, feature: str) -> Credits:
    [r] = db.fetch_all("select * from public.credit_balance(%s::uuid, %s)", (account_id, feature))
    return Credits(feature, r["balance"], r["granted"], r["used"], r["resets_at"], None)


def _taken(answer: Mapping[str, Any]) -> Taken:
    return Taken(
        state=answer["state"],
        feature=answer.get("feature", ""),
        balance=int(answer.get("balance") or 0),
        overage=int(answer.get("overage") or 0),
        first=bool(answer.get("first")),
        granted=int(answer.get("granted") or 0),
        before=int(answer.get("before") or 0),
        mark=int(answer["mark"]) if answer.get("mark") is not None else None,
        answer=_answer(answer.get("answer")),
        capped=bool(answer.get("capped")),
    )


def _answer(kept: Any) -> Answer | None:
    if not isinstance(kept, Mapping):
        return None
    return Answer(
        int(kept["status"]),
        kept.get("type"),
        base64.b64decode(kept.get("body") or ""),
        kept.get("request"),
    )


# A report's lease: a reporter that crashed after claiming leaves the overage to the next
# delivery after this long (Stripe's identifier makes a second send count once anyway).
REPORT_LEASE_SECONDS = 120


def claim_reports(db: Database, keys: Sequence[str], claim: str) -> list[dict[str, Any]]:
    """The overages of these consumptions not reported yet and not claimed by another reporter
    now, claimed for this one (`claim`, its token: the statement sent again after a broken
    connection finds its own claims): key, meter, customer, overage, when consumed."""
    return db.fetch_all(
        "update public.credit_uses set report_claim = %s::uuid, report_claimed_at = now()"
        " where key = any(%s) and overage > 0 and state = 'consumed' and reported_at is null"
        " and (report_claimed_at is null or report_claim = %s::uuid"
        " or report_claimed_at < now() - make_interval(secs => %s))"
        " returning key, meter, customer_id, overage, created_at",
        (claim, list(keys), claim, REPORT_LEASE_SECONDS),
    )


def reported(db: Database, keys: Sequence[str], *, error: str | None = None) -> None:
    """These overages are done: reported to the meter, or given up with `error`."""
    if keys:
        db.fetch_all(
            "update public.credit_uses set reported_at = now(), report_error = %s"
            " where key = any(%s) and reported_at is null returning key",
            (error, list(keys)),
        )


def release_stale(db: Database, *, older_than_seconds: int) -> list[str]:
    """Release the reservations unsettled this long (their request died before settling
    them): their credits come back. The keys released."""
    rows = db.fetch_all("select public.credits_release_stale(%s) as key", (older_than_seconds,))
    return [str(r["key"]) for r in rows]


def unreported(db: Database, *, older_than_seconds: int) -> list[str]:
    """Overages not reported this long after their consumption (an announcement lost
    between the commit and the bus): the keys to announce again."""
    rows = db.fetch_all(
        "select key from public.credit_uses where overage > 0 and state = 'consumed'"
        " and reported_at is null and created_at < now() - make_interval(secs => %s)"
        " order by created_at limit 1000",
        (older_than_seconds,),
    )
    return [str(r["key"]) for r in rows]


def still_unreported(db: Database, keys: Sequence[str]) -> set[str]:
    """Which of these consumptions' overages are not reported yet (another delivery holds
    their claim, or its reporter stopped before marking them)."""
    if not keys:
        return set()
    rows = db.fetch_all(
        "select key from public.credit_uses where key = any(%s) and overage > 0"
        " and state = 'consumed' and reported_at is null",
        (list(keys),),
    )
    return {str(r["key"]) for r in rows}


def customers_of(db: Database, keys: Sequence[str]) -> dict[str, str | None]:
    """The Stripe customer each consumption's overage was billed to, by key."""
    if not keys:
        return {}
    rows = db.fetch_all(
        "select u.key, coalesce(u.customer_id, a.customer_id) as customer"
        " from public.credit_uses u join public.accounts a on a.id = u.account_id"
        " where u.key = any(%s)",
        (list(keys),),
    )
    return {str(r["key"]): r["customer"] for r in rows}


# A consumption's claim of its account's automatic top-up, after it committed: when top-up is on
# for the feature, none is in flight, and the balance is now below its threshold, the claim is
# taken and numbered. A conditional update of one row: parallel consumptions see it claimed
# (the row is skipped, or re-read once its first claimer commits), so one claims it.
CLAIM_TOP_UP = (
    "update public.credit_top_ups t set crossings = t.crossings + 1, claimed_at = now(),"
    " payment_intent = null, updated_at = now()"
    " where t.account_id = %s::uuid and t.feature = %s and t.enabled and t.claimed_at is null"
    " and (select b.balance from public.credit_balance(t.account_id, t.feature) b) < t.below"
    " returning t.crossings"
)


def claim_top_up(db: Database, account_id: str, feature: str) -> int | None:
    """The number of the automatic top-up this claims for the account's feature, or None (off,
    one in flight, or the balance not below its threshold)."""
    rows = db.fetch_all(CLAIM_TOP_UP, (account_id, feature))
    return int(rows[0]["crossings"]) if rows else None


def unannounced_top_ups(db: Database, *, older_than_seconds: int) -> list[dict[str, Any]]:
    """Top-ups claimed this long ago and not charged yet (their announcement lost between the
    commit and the bus, or their charge failing): account_id, feature, crossings."""
    return db.fetch_all(
        "select account_id::text, feature, crossings from public.credit_top_ups"
        " where claimed_at < now() - make_interval(secs => %s) and payment_intent is null"
        " order by claimed_at limit 1000",
        (older_than_seconds,),
    )


def alert_terms(db: Database, account_id: str, feature: str) -> AlertTerms:
    """What an alert tells of what comes next for the account's feature."""
    [row] = db.fetch_all(
        "select b.resets_at, t.meter is not null as billed, t.cap"
        " from public.credit_balance(%s::uuid, %s) b"
        " left join public.credit_overage_terms(%s::uuid, %s) t on true",
        (account_id, feature, account_id, feature),
    )
    return AlertTerms(resets_at=row["resets_at"], billed=bool(row["billed"]), cap=row["cap"])


def contact(db: Database, account_id: str) -> dict[str, Any] | None:
    """Whom an account's credit mails address: the person; a team's owner who has held the role
    longest (as its billing mail), with the team's name."""
    rows = db.fetch_all(
        "select coalesce(o.email, p.email) as email, coalesce(o.name, p.name) as name,"
        " t.name as team_name"
        " from public.accounts a"
        " left join public.profiles p on a.kind = 'personal' and p.id = a.owner_id"
        " left join public.teams t on a.kind = 'team' and t.id = a.id"
        " left join lateral (select pr.email, pr.name from public.team_members m"
        "   join public.profiles pr on pr.id = m.user_id"
        "   where a.kind = 'team' and m.team_id = a.id and m.role = 'owner'"
        "   order by m.joined_at, m.user_id limit 1) o on true"
        " where a.id = %s::uuid",
        (account_id,),
    )
    if not rows or not rows[0]["email"]:
        return None
    return dict(rows[0])
