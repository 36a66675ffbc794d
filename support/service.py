"""The support API's use cases: who may call it, the audit of each call, finding a customer and
everything recorded about them, complimentary grants, replaying an event from Stripe, and the
founder's figures. Handlers call these; the rules are `support/rules.py`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from accounts import leaving_store as leaving
from adapters.bus import EventBus, PublishError
from adapters.db import profiles
from adapters.db.pool import Database
from adapters.mail.message import KeepsSent, Mailer, MailError
from adapters.stripe_api import PaymentsNotConfigured, PaymentsUnavailable, StripeGateway
from adapters.tokens import User
from core import stripe_objects
from core.app_events import EMAIL_RESEND_REQUESTED
from core.errors import Conflict, InvalidRequest, NotConfigured, NotFound, Unavailable
from core.events import Event, app_event, events_in, parse_event
from events import ledger
from support import audit_store as audit
from support import rules
from support import store as support

if TYPE_CHECKING:
    from config import Settings

# The access cycle for one event (access/subscriber.py, which sits beside the services): its
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
    person = rules.Identity(k.user_id, k.email, k.customers, k.accounts)
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
        # Its repository is given for a paid purchase only (github_access/service.py): a comp
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


@dataclass(frozen=True)
class Resends:
    """How the api takes a resend. In one process the copy is read back and sent in the
    request (`mailer`). With the Pub/Sub design the api holds no Resend key: it claims the
    resend and publishes `app.email.resend_requested`, and the emails target, which holds the
    key, sends it (`mailer` None; `resend_requested`)."""

    db: Database
    bus: EventBus
    mailer: Mailer | None


@dataclass(frozen=True)
class Resent:
    answer: dict[str, Any]
    # The emails target sends it (the Pub/Sub design): not sent yet when answered.
    handed_over: bool = False


def resend(resends: Resends, *, sent_email_id: str, admin: User) -> Resent:
    """Send a sent e-mail again, the same message to the same address, once: a second resend
    of the same e-mail is refused (409), so no loop or double click floods a customer. Sent
    here, or claimed here and handed to the emails target."""
    db, mailer = resends.db, resends.mailer
    event_id, _, kind = sent_email_id.rpartition(":")
    sent = support.sent_email(db, event_id, kind) if event_id else None
    if sent is None:
        raise NotFound("No such sent e-mail (sentEmailId is `<eventId>:<kind>`)")
    if not sent.recipient:
        raise Conflict(ERASED)
    if kind not in rules.RESENDABLE:
        raise Conflict(
            f"A {kind} e-mail is not sent again: what it says may no longer be true (sent again:"
            f" {', '.join(sorted(rules.RESENDABLE))})"
        )
    if mailer is not None and not isinstance(mailer, KeepsSent):
        raise NotConfigured("This mail provider cannot read back what it sent")
    answer = {"sentEmailId": f"{event_id}:{kind}", "kind": kind, "recipient": sent.recipient}
    if not support.claim_resend(db, sent, admin_id=admin.id):
        claim = support.resend_claim(db, sent)
        if claim is None or claim.sent:
            raise Conflict("This e-mail was sent again already; it is sent again only once")
        if mailer is not None:  # another request is sending it now
            raise Conflict("This e-mail is being sent again already; it is sent again only once")
        # Handed on before and not sent yet (the emails target retrying, or its delivery
        # dead-lettered): asked again, the same event goes again, and is sent at most once.
        _hand_over(resends, sent, undo=False)
        return Resent(answer, handed_over=True)
    if mailer is None:
        _hand_over(resends, sent, undo=True)
        return Resent(answer, handed_over=True)
    try:
        _send_copy(db, sent, mailer)
    except MailError as exc:
        support.unclaim_resend(db, sent)
        raise Unavailable("The mail provider failed; try again shortly") from exc
    except (NotKept, Erased) as exc:
        support.unclaim_resend(db, sent)
        raise Conflict(str(exc)) from exc
    return Resent(answer)


# The provider keeps its copy of a mail, address and all, after the person's deletion erased
# that address here: a deleted person's mail is never sent again.
ERASED = "The recipient deleted their account: their e-mails are not sent again"


class NotKept(Exception):
    """The mail provider no longer keeps the e-mail: there is no copy to send again."""


class Erased(Exception):
    """The recipient's address was erased (their deletion) since the resend was asked."""


def _send_copy(db: Database, sent: support.SentEmail, mailer: Mailer) -> None:
    """Read the copy back from the provider and send it, under a key of its own: the same
    resend sent twice (a redelivery, a retry) is sent once by the provider."""
    if not isinstance(mailer, KeepsSent):
        raise NotConfigured("This mail provider cannot read back what it sent")
    event_id, kind = sent.event_id, sent.kind
    copy = mailer.sent_copy(provider_id=sent.provider_id, idempotency_key=f"{event_id}/{kind}")
    if copy is None:
        raise NotKept("The mail provider no longer keeps this e-mail")
    # Asked again at the last moment: a deletion may have run since the resend was asked.
    now = support.sent_email(db, event_id, kind)
    if now is None or not now.recipient:
        raise Erased(ERASED)
    result = mailer.send(copy, idempotency_key=f"resend/{event_id}/{kind}")
    provider_id = result.get("id")
    support.resent(db, sent, provider_id=str(provider_id) if provider_id else None)


def _hand_over(resends: Resends, sent: support.SentEmail, *, undo: bool) -> None:
    """Ask the emails target to send the copy. The event's id is the sent e-mail's: asking
    again publishes the same event, and the claim says whether it went out. Not handed on
    (the bus down), a claim made for it is undone (`undo`): the admin may ask again."""
    event, data = app_event(
        EMAIL_RESEND_REQUESTED,
        event_id=f"email_resend_{sent.event_id}:{sent.kind}",
        obj={"event_id": sent.event_id, "kind": sent.kind},
        created=datetime.now(UTC),
    )
    try:
        resends.bus.publish(event, data)
    except PublishError as exc:
        if undo:
            support.unclaim_resend(resends.db, sent)
        raise Unavailable("The resend could not be handed on; try again shortly") from exc


def resend_requested(event: Event, *, db: Database, mailer: Mailer) -> str:
    """The emails target's handling of `app.email.resend_requested`: read the copy back and
    send it, once. What it returns acknowledges the delivery: `resent <kind>`; `duplicate`
    (sent already: a redelivery sends nothing); `no e-mail` (no longer claimed); or `not
    kept` (the provider no longer keeps it: the claim is undone, so the admin sees it not
    resent and may ask again); `erased` (the recipient deleted their account since: nothing
    is sent, ever). A provider failure raises: Pub/Sub delivers it again, and the
    key makes the provider send it once."""
    sent = support.sent_email(db, str(event.object["event_id"]), str(event.object["kind"]))
    claim = support.resend_claim(db, sent) if sent is not None else None
    if sent is None or claim is None:
        return "no e-mail"  # gone since (its account deleted) or undone: nothing to send
    if claim.sent:
        return "duplicate"
    try:
        _send_copy(db, sent, mailer)
    except NotKept:
        support.unclaim_resend(db, sent)
        log.warning("resend of %s:%s: the provider no longer keeps it", sent.event_id, sent.kind)
        return "not kept"
    except Erased:
        support.unclaim_resend(db, sent)
        return "erased"
    return f"resent {sent.kind}"


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
    return leaving.open_founder_tasks(db)


def finish_founder_task(db: Database, task_id: str) -> dict[str, Any]:
    """A task the founder did by hand, marked done; 404 for one that does not exist."""
    found = leaving.finish_founder_task(db, _uuid(task_id, "taskId"))
    if found is None:
        raise NotFound(f"No founder task {task_id}")
    return found
