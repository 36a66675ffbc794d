"""The support API's use cases: who may call it, the audit of each call, finding a customer and
everything recorded about them, complimentary grants, replaying an event from Stripe, and the
founder's figures. Handlers call these; the rules are `core/support.py`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from adapters.bus import EventBus, PublishError
from adapters.db import audit, ledger, profiles, support
from adapters.db.pool import Database
from adapters.mail.message import KeepsSent, Mailer, MailError
from adapters.stripe_api import PaymentsNotConfigured, PaymentsUnavailable, StripeGateway
from adapters.tokens import User
from core import stripe_objects
from core import support as rules
from core.events import Event, events_in, parse_event
from services.errors import Conflict, InvalidRequest, NotConfigured, NotFound, Unavailable

if TYPE_CHECKING:
    from config import Settings

# The access cycle for one event (subscribers/access.py, which sits beside the services): its
# outcome, or the exception it failed with.
Apply = Callable[[Event], str]

log = logging.getLogger(__name__)

LEDGER_CONSUMER = "access"
SECOND_FACTOR = "aal2"


def is_admin(user: User | None, *, db: Database, mfa_required: bool) -> bool:
    """Whether this caller may use the support API: a signed-in user whose profile says admin
    and, unless the setting relaxes it (never in production), whose token shows a second
    factor (Supabase MFA's `aal2`)."""
    if user is None:
        return False
    if mfa_required and user.aal != SECOND_FACTOR:
        return False
    profile = profiles.by_id(db, user.id)
    return profile is not None and profile.is_admin


def record_call(db: Database, entry: audit.Entry) -> int:
    """Append the call to the audit log before it does anything (a failure stops the call)."""
    return audit.record(db, entry)


def require_reason(reason: object) -> str:
    """The change's reason, or a 400 naming it."""
    problem = rules.reason_problem(reason)
    if problem is not None or not isinstance(reason, str):
        raise InvalidRequest(problem or "A reason is required (reason)")
    return reason.strip()


def page_size(limit: int | None) -> int:
    if limit is None:
        return rules.PAGE_DEFAULT
    if not 1 <= limit <= rules.PAGE_MOST:
        raise InvalidRequest(f"limit must lie between 1 and {rules.PAGE_MOST} (limit)")
    return limit


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    next_cursor: str | None


def search(db: Database, *, q: str, limit: int | None, cursor: str | None) -> Page:
    """People by e-mail or name (containing `q`), Stripe customer id or user id (equal to it)."""
    if not q.strip():
        raise InvalidRequest("q is required: an e-mail, a name, a Stripe customer id or a user id")
    size = page_size(limit)
    after = _uuid_cursor(cursor)
    found = support.search(db, q=q.strip(), limit=size + 1, after=after)
    more = len(found) > size
    items = found[:size]
    return Page(items, str(items[-1]["id"]) if more else None)


def customer(
    db: Database, user_id: str, *, dead_letters: list[tuple[str, Event]]
) -> dict[str, Any]:
    """Everything recorded about a person, and the dead letters that concern them (with what
    the ledger says of each now: a replayed one shows its outcome)."""
    found = support.customer(db, user_id)
    if found is None:
        raise NotFound("No such customer")
    k = support.keys(db, user_id)
    person = rules.Person(k.user_id, k.email, k.customers, k.accounts)
    theirs = [(name, e) for name, e in dead_letters if rules.concerns(e, person)]
    outcomes = _outcomes(db, [e.id for _, e in theirs])
    found["deadLetters"] = [
        {
            "subscriber": name,
            "eventId": e.id,
            "type": e.type,
            "created": e.created.isoformat(),
            "appliedSince": outcomes.get(e.id),
        }
        for name, e in theirs
    ]
    return found


def _outcomes(db: Database, event_ids: list[str]) -> dict[str, str]:
    if not event_ids:
        return {}
    rows = db.fetch_all(
        "select event_id, outcome from public.processed_events"
        " where consumer = %s and event_id = any(%s)",
        (LEDGER_CONSUMER, event_ids),
    )
    return {str(r["event_id"]): str(r["outcome"]) for r in rows}


def give_comp(
    db: Database,
    *,
    user_id: str,
    price_id: str,
    until: datetime | None,
    reason: str,
    admin: User,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A complimentary grant of the product sold at `price_id` to the person's own account."""
    if (problem := rules.until_problem(until, now=now or datetime.now(UTC))) is not None:
        raise InvalidRequest(problem)
    account = support.personal_account(db, user_id)
    if account is None:
        raise NotFound("No such customer")
    kind = support.product_type(db, price_id)
    if kind is None:
        raise InvalidRequest(f"No product is sold at {price_id} (priceId)")
    if kind == "github":
        # Its repository is given for a paid purchase only (services/github_access.py): a comp
        # would list a feature its holder cannot use.
        raise InvalidRequest(f"{price_id} sells a repository, which a comp cannot give (priceId)")
    return support.add_comp(
        db, account_id=account, price_id=price_id, until=until, admin_id=admin.id, reason=reason
    )


def end_grant(db: Database, grant_id: str) -> dict[str, Any]:
    """End a comp now. Stripe's grants end in Stripe (a refund, a cancellation), whose event
    then ends them here: 409 saying so."""
    _uuid(grant_id, "grantId")
    found = support.grant_kind(db, grant_id)
    if found is None:
        raise NotFound("No such grant")
    if found.kind != "comp":
        raise Conflict(
            f"This grant comes from a Stripe {found.kind}: end it in Stripe (cancel the"
            " subscription or refund the payment), and Stripe's event ends it here"
        )
    ended = support.end_comp(db, grant_id)
    if ended is None:
        raise Conflict("This comp has ended already")
    return ended


def replay(
    *, event_id: str, stripe: StripeGateway, db: Database, access: Apply, bus: EventBus
) -> dict[str, Any]:
    """Fetch the event from Stripe and apply it: the access cycle's ledger applies it once (an
    event applied before is a redelivery and changes nothing), then it is published again so
    every other subscriber (the e-mails) gets it too, each as idempotent as ever. What the api
    cannot apply itself (on Pub/Sub, a guest's account is made by the access target only) the
    access target applies from the bus; 503 only when neither could take it."""
    try:
        body = stripe.event(event_id)
    except PaymentsNotConfigured as exc:
        raise NotConfigured("Payments are not configured") from exc
    except PaymentsUnavailable as exc:
        raise Unavailable("Stripe is unavailable right now; please try again shortly") from exc
    if body is None:
        raise NotFound(f"Stripe knows no event {event_id} (it keeps 30 days)")
    event = parse_event(body)
    if not stripe_objects.is_supported(event.api_version):
        raise Conflict(f"{event_id} is at API version {event.api_version}, which is not read")
    before = not ledger.missing(db, consumer=LEDGER_CONSUMER, event_ids=[event.id])
    applied = True
    try:
        access(event)
    except Exception as exc:  # e.g. a guest's account only the access target may make
        applied = False
        log.warning("replay of %s not applied here: %s", event.id, exc)
    published = True
    try:
        bus.publish(event, json.dumps(body, separators=(",", ":")).encode())
    except PublishError as exc:
        published = False
        log.warning("replay of %s not republished: %s", event.id, exc)
    if not applied and not published:
        raise Unavailable(f"{event_id} could not be applied now; try again shortly")
    return {
        "eventId": event.id,
        "type": event.type,
        # The ledger's; None while the access target has yet to apply what was republished.
        "outcome": _outcomes(db, [event.id]).get(event.id),
        "appliedBefore": before,
        "republished": published,
    }


def resend(db: Database, *, sent_email_id: str, mailer: Mailer, admin: User) -> dict[str, Any]:
    """Send a sent e-mail again, the same message to the same address, once: a second resend
    of the same e-mail is refused (409), so no loop or double click floods a customer."""
    event_id, _, kind = sent_email_id.rpartition(":")
    sent = support.sent_email(db, event_id, kind) if event_id else None
    if sent is None:
        raise NotFound("No such sent e-mail (sentEmailId is `<eventId>:<kind>`)")
    if kind not in rules.RESENDABLE:
        raise Conflict(
            f"A {kind} e-mail is not sent again: what it says may no longer be true (sent again:"
            f" {', '.join(sorted(rules.RESENDABLE))})"
        )
    if not isinstance(mailer, KeepsSent):
        raise NotConfigured("This mail provider cannot read back what it sent")
    if not support.claim_resend(db, sent, admin_id=admin.id):
        raise Conflict("This e-mail was sent again already; it is sent again only once")
    try:
        copy = mailer.sent_copy(provider_id=sent.provider_id, idempotency_key=f"{event_id}/{kind}")
        if copy is None:
            raise Conflict("The mail provider no longer keeps this e-mail")
        result = mailer.send(copy, idempotency_key=f"resend/{event_id}/{kind}")
    except MailError as exc:
        support.unclaim_resend(db, sent)
        raise Unavailable("The mail provider failed; try again shortly") from exc
    except Conflict:
        support.unclaim_resend(db, sent)
        raise
    provider_id = result.get("id")
    support.resent(db, sent, provider_id=str(provider_id) if provider_id else None)
    return {"sentEmailId": f"{event_id}:{kind}", "kind": kind, "recipient": sent.recipient}


def metrics(db: Database, *, now: datetime | None = None) -> dict[str, Any]:
    at = now or datetime.now(UTC)
    return rules.metrics(
        support.subscriptions(db), support.refunds(db, since=at - rules.RECENT), now=at
    )


def audit_page(db: Database, *, limit: int | None, cursor: str | None) -> Page:
    size = page_size(limit)
    before = None
    if cursor is not None:
        if not cursor.isdigit():
            raise InvalidRequest("cursor is not one this listing gave (cursor)")
        before = int(cursor)
    rows = audit.page(db, limit=size + 1, before=before)
    more = len(rows) > size
    items = [_audit_row(r) for r in rows[:size]]
    return Page(items, str(items[-1]["id"]) if more else None)


def _audit_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "at": row["at"].isoformat(),
        "adminId": row["admin_id"],
        "adminEmail": row["admin_email"],
        "action": row["action"],
        "subjectUserId": row["subject_user_id"],
        "subject": row["subject"],
        "reason": row["reason"],
        "request": row["request"],
    }


def held_dead_letters(settings: Settings, bus: EventBus) -> list[tuple[str, Event]]:
    """What the bus gave up on, by subscriber: the in-process bus's list, or what the
    dead-letter subscription holds (looked at, not taken: available again at once)."""
    if settings.event_bus != "pubsub":
        return list(getattr(bus, "dead_letters", []))
    from adapters.bus.dead_letters import dead_letter_box

    with dead_letter_box(
        project=settings.google_cloud_project,
        topic=settings.pubsub_topic,
        emulator_host=settings.pubsub_emulator_host,
    ) as box:
        letters = box.pull_all()
        box.release(letters)
    found: list[tuple[str, Event]] = []
    for letter in letters:
        try:
            carried = events_in(letter.data)
        except ValueError:
            continue
        subscriber = letter.attributes.get("CloudPubSubDeadLetterSourceSubscription", "?")
        found += [(subscriber.rsplit("/", 1)[-1], e) for e in carried if isinstance(e, Event)]
    return found


def user_id(value: str) -> str:
    """A user id from a path, or a 400 naming it."""
    return _uuid(value, "userId")


def _uuid_cursor(cursor: str | None) -> str | None:
    return None if cursor is None else _uuid(cursor, "cursor")


def _uuid(value: str, name: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise InvalidRequest(f"{name} is not an id") from exc


def founder_tasks(db: Database) -> list[dict[str, Any]]:
    """What the founder must do by hand (a Stripe customer to redact, ...), not done yet."""
    from adapters.db import leaving

    return leaving.open_founder_tasks(db)


def finish_founder_task(db: Database, task_id: str) -> dict[str, Any]:
    """A task the founder did by hand, marked done; 404 for one that does not exist."""
    from adapters.db import leaving

    found = leaving.finish_founder_task(db, task_id) if _is_uuid(task_id) else None
    if found is None:
        raise NotFound(f"No founder task {task_id}")
    return found


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
