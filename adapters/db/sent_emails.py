"""The record of e-mails sent per (event, kind): at most one each."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.db import products, profiles
from adapters.db.pool import Database, Statement
from adapters.db.products import Product
from adapters.db.profiles import Profile

# How long a claim keeps other deliveries of the same e-mail away: longer than any send can take
# (a push is answered within its 60 s deadline), so an older claim is one whose process died.
CLAIM_LEASE_SECONDS = 120


_DROP_CLAIM = "delete from public.email_claims where event_id = %s and kind = %s"


class SendInProgress(RuntimeError):
    """Another delivery of the same event is sending this e-mail now: retry later."""


def claim(db: Database, *, event_id: str, kind: str, holder: str) -> bool:
    """Claim the (event, kind) e-mail for one send, in a transaction of its own that commits
    before the send; False when it was sent already. SendInProgress while another delivery holds
    a fresh claim; a claim older than the lease (its process died mid-send) is taken over, and
    the send repeated with the same idempotency key, which Resend answers with the first send.
    `holder` names this delivery: claiming again under it is the same claim, so the claim can
    be sent again over another connection when the first broke."""
    [[row]] = db.run(
        [
            Statement(
                "with sent as (select 1 from public.sent_emails where event_id = %(e)s"
                " and kind = %(k)s), taken as (insert into public.email_claims"
                " (event_id, kind, holder) select %(e)s, %(k)s, %(h)s"
                " where not exists (select 1 from sent)"
                " on conflict (event_id, kind) do update set claimed_at = now(), holder = %(h)s"
                " where email_claims.holder = %(h)s"
                " or email_claims.claimed_at < now() - make_interval(secs => %(lease)s)"
                " returning 1) select exists (select 1 from sent) as sent,"
                " exists (select 1 from taken) as claimed",
                {"e": event_id, "k": kind, "h": holder, "lease": CLAIM_LEASE_SECONDS},
            )
        ]
    )
    if row["sent"]:
        return False
    claimed = row["claimed"] or None
    if claimed is None:
        raise SendInProgress(f"{event_id}/{kind} is being sent by another delivery")
    return True


def release(db: Database, *, event_id: str, kind: str) -> None:
    """Drop a claim: the send failed before Resend took it, or never will succeed."""
    db.run([Statement(_DROP_CLAIM, (event_id, kind))])


_ANY_SENT = "select 1 from public.sent_emails where event_id = %s limit 1"


@dataclass(frozen=True)
class Facts:
    """What an event's e-mail needs from the database before it is planned."""

    sent: bool  # an e-mail was recorded for the event already (a redelivery)
    profile: Profile | None  # the customer's
    product: Product | None  # the price's


def look_up(db: Database, *, event_id: str, customer_id: str | None, price_id: str | None) -> Facts:
    """Whether the event was mailed, the customer's profile and the price's product, read in
    one round trip (three, one after another, before)."""
    statements = [Statement(_ANY_SENT, (event_id,))]
    if customer_id:
        statements.append(profiles.by_customer_statement(customer_id))
    if price_id:
        statements.append(products.by_price_statement(price_id))
    results = iter(db.run(statements))
    sent = bool(next(results))
    profile = profiles.first(next(results)) if customer_id else None
    product = products.first(next(results)) if price_id else None
    return Facts(sent=sent, profile=profile, product=product)


def record(
    db: Database, *, event_id: str, kind: str, recipient: str, provider_id: str | None
) -> None:
    """The e-mail was sent: record it, and settle its claim, in one transaction."""
    db.run(
        [
            Statement(
                "insert into public.sent_emails (event_id, kind, recipient, provider_id)"
                " values (%s, %s, %s, %s) on conflict do nothing",
                (event_id, kind, recipient, provider_id),
            ),
            # Repeatable: the insert skips a recorded send, the delete an absent claim.
            Statement(_DROP_CLAIM, (event_id, kind)),
        ]
    )
