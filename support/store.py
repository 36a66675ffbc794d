"""What the support API reads and writes about a customer: finding them, everything recorded
about them, their comps, and the local figures the metrics are computed from. Rows come back
as plain dicts in the API's own field names (built by Postgres, so each read is one query)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.db.pool import Database, Statement

# A grant's own answer, its liveness read against the clock (a comp ends at its `until`).
_GRANT = """jsonb_build_object(
  'id', e.id, 'accountId', e.account_id, 'kind', e.kind, 'sourceId', e.source_id,
  'priceId', e.price_id, 'product', pr.name, 'status', e.status,
  'active', e.active and (e.kind <> 'comp' or e.current_period_end is null
    or e.current_period_end > now()),
  'currentPeriodEnd', e.current_period_end, 'endedAt', e.ended_at,
  'teamId', case when a.kind = 'team' then a.id end,
  'cause', case e.kind
    when 'comp' then jsonb_build_object('kind', 'comp', 'grantedBy', e.granted_by,
      'reason', e.reason, 'at', e.created_at)
    when 'subscription' then jsonb_build_object('kind', 'stripe subscription',
      'subscription', e.source_id, 'lastEvent', e.event_id, 'at', e.changed_at)
    else jsonb_build_object('kind', 'stripe checkout', 'checkoutSession', e.source_id,
      'lastEvent', e.event_id, 'at', e.changed_at) end)"""


def search(db: Database, *, q: str, limit: int, after: str | None) -> list[dict[str, Any]]:
    """People whose e-mail or name contains `q`, whose Stripe customer (any of their accounts')
    or user id is `q`; by id, after the id `after`."""
    pattern = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return db.fetch_all(
        'select p.id::text as id, p.email, p.name, p.has_access as "stripeAccess",'
        ' public.access_of(p.id) as "hasAccess", p.customer_id as "customerId",'
        ' p.created_at as "createdAt"'
        " from public.profiles p where (p.email ilike %(p)s or p.name ilike %(p)s"
        " or p.id::text = lower(%(q)s) or p.customer_id = %(q)s or exists ("
        "  select 1 from public.stripe_customers c join public.accounts a on a.id = c.account_id"
        "  where c.customer_id = %(q)s and (a.owner_id = p.id or a.id in ("
        "   select m.team_id from public.team_members m where m.user_id = p.id))))"
        " and (%(after)s::uuid is null or p.id > %(after)s::uuid)"
        " order by p.id limit %(limit)s",
        {"p": pattern, "q": q.strip(), "after": after, "limit": limit},
    )


def customer(db: Database, user_id: str) -> dict[str, Any] | None:
    """Everything recorded about a person: their profile, accounts and teams, grants with what
    caused each, purchases, the ledger's events about them, and the e-mails sent to them."""
    rows = db.fetch_all(
        "with person as (select * from public.profiles where id = %(u)s::uuid),"  # noqa: S608 - constants
        " mine as (select a.* from public.accounts a where a.kind = 'personal'"
        "  and a.owner_id = %(u)s::uuid"
        "  union select a.* from public.accounts a join public.team_members m"
        "  on m.team_id = a.id where m.user_id = %(u)s::uuid),"
        " grants as (select e.*, a.kind as account_kind from public.entitlements e"
        "  join mine a on a.id = e.account_id),"
        " bought as (select pu.* from public.purchases pu where pu.user_id = %(u)s::uuid"
        "  or pu.account_id in (select id from mine)),"
        " mailed as (select s.* from public.sent_emails s, person"
        "  where lower(s.recipient) = lower(person.email)),"
        " about as (select event_id from grants where event_id is not null"
        "  union select access_event_id from mine where access_event_id is not null"
        "  union select access_event_id from person where access_event_id is not null"
        "  union select event_id from mailed"
        "  union select 'completion_' || stripe_checkout_session_id from bought)"
        " select jsonb_build_object("
        "  'person', jsonb_build_object('id', p.id, 'email', p.email, 'name', p.name,"
        "   'isAdmin', p.is_admin, 'hasAccess', public.access_of(p.id),"
        "   'stripeAccess', p.has_access, 'customerId', p.customer_id,"
        "   'createdAt', p.created_at),"
        "  'accounts', coalesce((select jsonb_agg(jsonb_build_object("
        "   'id', a.id, 'kind', a.kind, 'customerId', a.customer_id, 'hasAccess', a.has_access,"
        "   'customers', coalesce((select jsonb_agg(c.customer_id order by c.customer_id)"
        "    from public.stripe_customers c where c.account_id = a.id), '[]'),"
        "   'team', (select jsonb_build_object('name', t.name, 'quantity', t.quantity,"
        "     'role', m.role, 'hasSeat', m.has_seat, 'joinedAt', m.joined_at)"
        "    from public.teams t join public.team_members m on m.team_id = t.id"
        "    where t.id = a.id and m.user_id = p.id))"
        "   order by a.kind, a.created_at) from mine a), '[]'),"
        f"  'grants', coalesce((select jsonb_agg({_GRANT} order by e.created_at desc)"
        "   from grants e join public.accounts a on a.id = e.account_id"
        "   left join public.products pr on pr.stripe_price_id = e.price_id), '[]'),"
        "  'purchases', coalesce((select jsonb_agg(jsonb_build_object('id', b.id,"
        "   'accountId', b.account_id, 'checkoutSession', b.stripe_checkout_session_id,"
        "   'customerId', b.stripe_customer_id, 'paymentIntent', b.stripe_payment_intent_id,"
        "   'amountTotal', b.amount_total, 'currency', b.currency, 'paid', b.paid,"
        "   'amountRefunded', b.amount_refunded, 'refundedAt', b.refunded_at,"
        "   'product', (select pr.name from public.products pr where pr.id = b.product_id),"
        "   'createdAt', b.created_at) order by b.created_at desc) from bought b), '[]'),"
        "  'events', coalesce((select jsonb_agg(jsonb_build_object('id', pe.event_id,"
        "   'type', pe.event_type, 'consumer', pe.consumer, 'created', pe.event_created,"
        "   'processedAt', pe.processed_at, 'outcome', pe.outcome)"
        "   order by pe.event_created desc) from public.processed_events pe"
        "   where pe.event_id in (select event_id from about)), '[]'),"
        "  'emails', coalesce((select jsonb_agg(jsonb_build_object('id', s.event_id || ':' ||"
        "   s.kind, 'eventId', s.event_id, 'kind', s.kind, 'recipient', s.recipient,"
        "   'sentAt', s.sent_at, 'resentAt', case when r.provider_id is not null"
        "   then r.resent_at end) order by s.sent_at desc)"
        "   from mailed s left join public.email_resends r using (event_id, kind)), '[]')"
        " ) as found from person p",
        {"u": user_id},
    )
    return rows[0]["found"] if rows else None


@dataclass(frozen=True)
class Keys:
    """What identifies a person in a Stripe event: to tell which dead letters concern them."""

    user_id: str
    email: str | None
    customers: frozenset[str]
    accounts: frozenset[str]


def keys(db: Database, user_id: str) -> Keys:
    rows = db.fetch_all(
        "select p.email, coalesce(array_agg(distinct c.customer_id)"
        "  filter (where c.customer_id is not null), '{}') as customers,"
        " coalesce(array_agg(distinct a.id::text) filter (where a.id is not null), '{}')"
        "  as accounts"
        " from public.profiles p left join public.accounts a on (a.kind = 'personal'"
        "  and a.owner_id = p.id) or a.id in (select m.team_id from public.team_members m"
        "  where m.user_id = p.id)"
        " left join public.stripe_customers c on c.account_id = a.id"
        " where p.id = %s::uuid group by p.email",
        (user_id,),
    )
    if not rows:
        return Keys(user_id, None, frozenset(), frozenset())
    row = rows[0]
    return Keys(user_id, row["email"], frozenset(row["customers"]), frozenset(row["accounts"]))


def personal_account(db: Database, user_id: str) -> str | None:
    """The person's own account's id; None when they have no profile."""
    rows = db.fetch_all(
        "select id::text from public.accounts where kind = 'personal' and owner_id = %s::uuid",
        (user_id,),
    )
    return str(rows[0]["id"]) if rows else None


def product_type(db: Database, price_id: str) -> str | None:
    """The type of the product sold at this price (`link`, `github`); None: no such price."""
    rows = db.fetch_all("select type from public.products where stripe_price_id = %s", (price_id,))
    return str(rows[0]["type"]) if rows else None


def add_comp(
    db: Database,
    *,
    account_id: str,
    price_id: str,
    until: datetime | None,
    admin_id: str,
    reason: str,
) -> dict[str, Any]:
    """A comp on the account, active until `until` (None: for good)."""
    with db.transaction() as conn:
        rows = conn.execute(
            "with made as (insert into public.entitlements (account_id, source_id, kind, price_id,"  # noqa: S608 - constants
            " status, active, current_period_end, changed_at, granted_by, reason)"
            " values (%(a)s::uuid, 'comp_' || gen_random_uuid(), 'comp', %(p)s, 'comp', true,"
            " %(until)s, now(), %(admin)s::uuid, %(r)s) returning *)"
            f" select {_GRANT} as grant from made e join public.accounts a on a.id = e.account_id"
            " left join public.products pr on pr.stripe_price_id = e.price_id",
            {"a": account_id, "p": price_id, "until": until, "admin": admin_id, "r": reason},
        ).fetchall()
    found: dict[str, Any] = rows[0]["grant"]
    return found


@dataclass(frozen=True)
class GrantKind:
    kind: str
    active: bool
    owner_id: str


def grant_kind(db: Database, grant_id: str) -> GrantKind | None:
    """A grant's kind, whether it still runs, and whose account holds it; None: no such grant."""
    rows = db.fetch_all(
        "select e.kind, e.active and (e.kind <> 'comp' or e.current_period_end is null"
        " or e.current_period_end > now()) as active, a.owner_id::text as owner_id"
        " from public.entitlements e join public.accounts a on a.id = e.account_id"
        " where e.id = %s::uuid",
        (grant_id,),
    )
    return GrantKind(rows[0]["kind"], rows[0]["active"], rows[0]["owner_id"]) if rows else None


def end_comp(db: Database, grant_id: str) -> dict[str, Any] | None:
    """End a comp now (it stays, ended, for the record); None when it is not a running comp."""
    rows = db.fetch_all(
        "with ended as (update public.entitlements set active = false, status = 'ended',"  # noqa: S608 - constants
        " ended_at = now(), changed_at = now() where id = %s::uuid and kind = 'comp'"
        " and active returning *)"
        f" select {_GRANT} as grant from ended e join public.accounts a on a.id = e.account_id"
        " left join public.products pr on pr.stripe_price_id = e.price_id",
        (grant_id,),
    )
    return rows[0]["grant"] if rows else None


def subscriptions(db: Database) -> list[dict[str, Any]]:
    """Every subscription grant, with its price's amount, interval and currency (the
    catalogue's, else the newest purchase at that price for a row synced before prices kept
    one) and its seats."""
    return db.fetch_all(
        "select e.status, e.active, e.created_at, e.ended_at, pr.price, pr.billing_interval,"
        " case when pr.per_seat then coalesce(t.quantity, 1) else 1 end as quantity,"
        " coalesce(pr.currency, (select pu.currency from public.purchases pu"
        "  where pu.product_id = pr.id and pu.currency is not null"
        "  order by pu.created_at desc limit 1)) as currency"
        " from public.entitlements e left join public.products pr"
        " on pr.stripe_price_id = e.price_id left join public.teams t on t.id = e.account_id"
        " where e.kind = 'subscription'"
    )


def refunds(db: Database, *, since: datetime) -> list[dict[str, Any]]:
    """Refunds recorded since then, per currency: how many purchases and how much."""
    return db.fetch_all(
        "select coalesce(currency, 'unknown') as currency, count(*) as count,"
        " sum(amount_refunded) as amount from public.purchases"
        " where amount_refunded > 0 and coalesce(refunded_at, created_at) >= %s"
        " group by 1 order by 1",
        (since,),
    )


def movements(db: Database, *, since: datetime) -> list[dict[str, Any]]:
    """The MRR movements recorded since then, summed per currency and kind."""
    return db.fetch_all(
        "select currency, kind, sum(delta) as delta from public.mrr_movements"
        " where at >= %s group by 1, 2 order by 1, 2",
        (since,),
    )


def cancellations(db: Database, *, since: datetime) -> list[dict[str, Any]]:
    """The subscriptions cancelled (or set to cancel) since then, by their customer's feedback:
    how many, and how many left a comment."""
    return db.fetch_all(
        "select feedback as reason, count(*) as count,"
        " count(*) filter (where has_comment) as with_comment"
        " from public.subscription_cancellations where cancelled and cancelled_at >= %s"
        " group by 1 order by 2 desc, 1 nulls last",
        (since,),
    )


@dataclass(frozen=True)
class SentEmail:
    event_id: str
    kind: str
    recipient: str
    provider_id: str | None


def sent_email(db: Database, event_id: str, kind: str) -> SentEmail | None:
    rows = db.fetch_all(
        "select event_id, kind, recipient, provider_id from public.sent_emails"
        " where event_id = %s and kind = %s",
        (event_id, kind),
    )
    return SentEmail(**rows[0]) if rows else None


def claim_resend(db: Database, sent: SentEmail, *, admin_id: str) -> bool:
    """Record that an admin sends this e-mail again; False when it was sent again already."""
    with db.transaction() as conn:
        rows = conn.execute(
            "insert into public.email_resends (event_id, kind, admin_id, recipient)"
            " values (%s, %s, %s::uuid, %s) on conflict do nothing returning event_id",
            (sent.event_id, sent.kind, admin_id, sent.recipient),
        ).fetchall()
    return bool(rows)


@dataclass(frozen=True)
class ResendClaim:
    admin_id: str
    sent: bool  # the provider took the copy (its id recorded)


def resend_claim(db: Database, sent: SentEmail) -> ResendClaim | None:
    """The claim of a resend of this e-mail; None when there is none (never, or undone)."""
    rows = db.fetch_all(
        "select admin_id::text, provider_id is not null as sent from public.email_resends"
        " where event_id = %s and kind = %s",
        (sent.event_id, sent.kind),
    )
    return ResendClaim(**rows[0]) if rows else None


def resent(db: Database, sent: SentEmail, *, provider_id: str | None) -> None:
    db.run(
        [
            Statement(
                # Sent now: on the Pub/Sub design the emails target sends it after the claim.
                "update public.email_resends set provider_id = %s, resent_at = now()"
                " where event_id = %s and kind = %s",
                (provider_id, sent.event_id, sent.kind),
            )
        ]
    )


def unclaim_resend(db: Database, sent: SentEmail) -> None:
    """The resend failed before the provider took it: it may be tried again."""
    db.run(
        [
            Statement(
                "delete from public.email_resends where event_id = %s and kind = %s",
                (sent.event_id, sent.kind),
            )
        ]
    )
