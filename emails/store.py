"""The record of e-mails sent per (event, kind): at most one each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.db import profiles
from adapters.db.pool import Database, Statement
from adapters.db.profiles import Profile
from catalogue import store as products
from catalogue.store import Product

# How long a claim keeps other deliveries of the same e-mail away: longer than any send can take
# (a push is answered within its 60 s deadline), so an older claim is one whose process died.
CLAIM_LEASE_SECONDS = 120


class SendInProgress(RuntimeError):
    """Another delivery of the same event is sending this e-mail now: retry later."""


# Claims and records name their e-mails as parallel arrays: a batch's in one statement.
_WANTED = "select * from unnest(%(e)s::text[], %(k)s::text[]) as w(event_id, kind)"
_DROP_CLAIMS = (
    "delete from public.email_claims c using (" + _WANTED + ") w"  # noqa: S608 - constant
    " where c.event_id = w.event_id and c.kind = w.kind"
)


def claim(db: Database, *, event_id: str, kind: str, holder: str) -> bool:
    """Claim the (event, kind) e-mail for one send, in a transaction of its own that commits
    before the send; False when it was sent already. SendInProgress while another delivery holds
    a fresh claim; a claim older than the lease (its process died mid-send) is taken over, and
    the send repeated with the same idempotency key, which Resend answers with the first send.
    `holder` names this delivery: claiming again under it is the same claim, so the claim can
    be sent again over another connection when the first broke."""
    email = (event_id, kind)
    [rows] = db.run([_claim_statement([email], holder)])
    [claimed] = _claims(rows, [email])
    if isinstance(claimed, SendInProgress):
        raise claimed
    return claimed


def _claim_statement(emails: Sequence[tuple[str, str]], holder: str) -> Statement:
    """Rows are claimed in key order, so two batches never wait on each other's claims in a
    cycle."""
    return Statement(
        f"with wanted as ({_WANTED}), sent as (select w.event_id, w.kind from wanted w"  # noqa: S608
        " join public.sent_emails s using (event_id, kind)),"
        " taken as (insert into public.email_claims (event_id, kind, holder)"
        " select w.event_id, w.kind, %(h)s from wanted w"
        " where not exists (select 1 from sent where sent.event_id = w.event_id"
        " and sent.kind = w.kind) order by w.event_id, w.kind"
        " on conflict (event_id, kind) do update set claimed_at = now(), holder = %(h)s"
        " where email_claims.holder = %(h)s"
        " or email_claims.claimed_at < now() - make_interval(secs => %(lease)s)"
        " returning event_id, kind)"
        " select w.event_id, w.kind,"
        " exists (select 1 from sent where sent.event_id = w.event_id"
        " and sent.kind = w.kind) as sent,"
        " exists (select 1 from taken where taken.event_id = w.event_id"
        " and taken.kind = w.kind) as claimed from wanted w",
        {**_arrays(emails), "h": holder, "lease": CLAIM_LEASE_SECONDS},
    )


def _claims(
    rows: list[dict[str, Any]], emails: Sequence[tuple[str, str]]
) -> list[bool | SendInProgress]:
    found = {(row["event_id"], row["kind"]): row for row in rows}
    return [_claimed(found[email], email) for email in emails]


def _claimed(row: dict[str, Any], email: tuple[str, str]) -> bool | SendInProgress:
    if row["sent"]:
        return False
    if row["claimed"]:
        return True
    return SendInProgress(f"{email[0]}/{email[1]} is being sent by another delivery")


def release(db: Database, *, event_id: str, kind: str) -> None:
    """Drop a claim: the send failed before Resend took it, or never will succeed."""
    release_many(db, [(event_id, kind)])


def release_many(db: Database, emails: Sequence[tuple[str, str]]) -> None:
    """`release` for several e-mails in one statement."""
    if emails:
        db.run([Statement(_DROP_CLAIMS, _arrays(emails))])


@dataclass(frozen=True)
class Wanted:
    """An event's e-mail to claim, and what planning it needs: the event's id, the kind its
    type calls for, its customer's and its price's ids."""

    event_id: str
    kind: str
    customer_id: str | None
    price_id: str | None


@dataclass(frozen=True)
class Facts:
    """An event's e-mail claimed (or not), with what it needs from the database to be planned."""

    claimed: bool | SendInProgress  # True: this delivery sends it; False: it was sent already
    profile: Profile | None  # whom mail about the customer addresses (a team's: an owner)
    product: Product | None  # the price's
    team: bool = False  # the customer is a team's: its mail goes to the profile, an owner


def claim_and_look_up(db: Database, wanted: Sequence[Wanted], *, holder: str) -> list[Facts]:
    """Claim each event's e-mail (as `claim` does one) and read its customer's profile and its
    price's product, in one transaction and one round trip, whatever the batch's size. A claim
    whose e-mail turns out not to be sent must be released (`release_many`)."""
    if not wanted:
        return []
    emails = [(w.event_id, w.kind) for w in wanted]
    customers = sorted({w.customer_id for w in wanted if w.customer_id})
    prices = sorted({w.price_id for w in wanted if w.price_id})
    claim_rows, profile_rows, product_rows = db.run(
        [
            _claim_statement(emails, holder),
            profiles.by_customers_statement(customers),
            products.by_prices_statement(prices),
        ]
    )
    by_customer = {c: (team, p) for c, team, p in map(profiles.from_customer_row, profile_rows)}
    by_price = {p.stripe_price_id: p for p in map(Product.from_row, product_rows)}
    nobody: tuple[bool, Profile | None] = (False, None)
    return [
        Facts(
            claimed=claimed,
            profile=by_customer.get(w.customer_id or "", nobody)[1],
            product=by_price.get(w.price_id) if w.price_id else None,
            team=by_customer.get(w.customer_id or "", nobody)[0],
        )
        for w, claimed in zip(wanted, _claims(claim_rows, emails), strict=True)
    ]


def record(
    db: Database, *, event_id: str, kind: str, recipient: str, provider_id: str | None
) -> None:
    """The e-mail was sent: record it, and settle its claim, in one transaction."""
    record_many(db, [Sent(event_id, kind, recipient, provider_id)])


@dataclass(frozen=True)
class Sent:
    """An e-mail Resend took: what `record_many` writes."""

    event_id: str
    kind: str
    recipient: str
    provider_id: str | None


def record_many(db: Database, sent: Sequence[Sent]) -> None:
    """Record sent e-mails and settle their claims, in one transaction and one round trip."""
    if not sent:
        return
    emails = [(s.event_id, s.kind) for s in sent]
    db.run(
        [
            Statement(
                "insert into public.sent_emails (event_id, kind, recipient, provider_id)"
                " select * from unnest(%(e)s::text[], %(k)s::text[], %(r)s::text[],"
                " %(p)s::text[]) on conflict do nothing",
                {
                    **_arrays(emails),
                    "r": [s.recipient for s in sent],
                    "p": [s.provider_id for s in sent],
                },
            ),
            # Repeatable: the insert skips a recorded send, the delete an absent claim.
            Statement(_DROP_CLAIMS, _arrays(emails)),
        ]
    )


def _arrays(emails: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    return {"e": [event_id for event_id, _ in emails], "k": [kind for _, kind in emails]}
