"""Send the e-mail each event calls for, at most once per (event, kind)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TypeVar

from pydantic import ValidationError

from adapters.accounts import Accounts
from adapters.bus.envelope import outcome_fields
from adapters.db.pool import Database
from adapters.db.profiles import Profile
from adapters.mail.message import Mailer, MailError, UndeliverableEmail, send_email
from core.app_events import EMAIL_RESEND_REQUESTED
from core.events import Event, InvalidEvent
from emails import store as sent_emails
from emails.kind import Senders
from emails.kinds import kind_of, signin_link
from emails.plan import (
    PlannedEmail,
    Recipient,
    customer_of,
    kind_for,
    plan,
    price_of,
    recipient_in,
)
from emails.render import Brand, EmailContent, render
from emails.store import SendInProgress

log = logging.getLogger(__name__)

CONSUMER = "emails"
T = TypeVar("T")


@dataclass(frozen=True)
class EmailSubscriber:
    """Renders and sends; the (event, kind) row and Resend's idempotency key prevent repeats."""

    db: Database
    mailer: Mailer
    brand: Brand
    accounts: Accounts
    senders: Senders
    reply_to: str
    # Sends again the sent e-mail an `app.email.resend_requested` names, once: its outcome;
    # raises when the provider fails, so that the delivery comes back (support/service.py
    # `resend_requested`, given by the composition root).
    resend: Callable[[Event], str]

    def __call__(self, event: Event) -> str:
        [outcome] = self.send_many([event])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def send_many(self, events: Sequence[Event]) -> list[str | Exception]:
        """Send what each event calls for: each event's outcome, or what it failed with (to be
        redelivered). The batch's e-mails are claimed, with what planning them needs, in one
        round trip, and recorded once sent in one: two round trips, whatever its size. A second
        copy of an event in the batch (a redelivery) is a duplicate, or fails with the first."""
        unique = list({event.id: event for event in events}.values())
        outcomes: dict[str, str | Exception] = {}
        wanted: list[tuple[Event, sent_emails.Wanted]] = []
        for event in unique:
            if event.type == EMAIL_RESEND_REQUESTED:
                # Its own claim (the admin's), not a (event, kind) row of this batch.
                outcomes[event.id] = _attempt(partial(self.resend, event))
                continue
            # An event's type names the one e-mail it may call for: claimed before its facts
            # are known, released when they call for none.
            if (kind := kind_for(event.type)) is None:
                outcomes[event.id] = "no e-mail"
            else:
                wanted.append(
                    (event, sent_emails.Wanted(event.id, kind, customer_of(event), price_of(event)))
                )
        holder = uuid.uuid4().hex  # this delivery: the claim may be sent twice, not taken twice
        facts = sent_emails.claim_and_look_up(self.db, [w for _, w in wanted], holder=holder)
        planned: list[tuple[Event, PlannedEmail]] = []
        unclaim: list[tuple[str, str]] = []
        for (event, want), found in zip(wanted, facts, strict=True):
            if isinstance(found.claimed, SendInProgress):
                outcomes[event.id] = found.claimed  # another delivery is sending it
                continue
            if not found.claimed:
                outcomes[event.id] = "duplicate"  # sent already
                continue
            mail = _attempt(partial(self._plan, event, found))
            if isinstance(mail, PlannedEmail):
                planned.append((event, mail))
                continue
            outcomes[event.id] = "no e-mail" if mail is None else mail
            unclaim.append((event.id, want.kind))
        if unclaim:
            # Not to be sent (or not now): a redelivery may claim it again at once.
            with contextlib.suppress(Exception):
                sent_emails.release_many(self.db, unclaim)
        outcomes |= self._send_claimed(planned)
        seen: set[str] = set()
        results: list[str | Exception] = []
        for event in events:
            outcome = outcomes[event.id]
            if event.id in seen and not isinstance(outcome, Exception):
                outcome = "duplicate"  # one event delivered twice into one batch
            seen.add(event.id)
            _log_outcome(event, outcome)
            results.append(outcome)
        return results

    def _plan(self, event: Event, facts: sent_emails.Facts) -> PlannedEmail | None:
        to = recipient_in(event)
        if facts.team:
            # A team's mail goes to its current owner, not to the address Stripe's customer
            # was made with (whoever created the team, who may have left it since).
            to = None
        if to is None or to.name is None:
            # Stripe's object often names nobody: the profile's address, or its name for the
            # greeting when it is the same person.
            known = _recipient(facts.profile)
            if to is None or (known and known.name and known.email.lower() == to.email.lower()):
                to = known
        if to is None:
            return None
        product = facts.product.facts() if facts.product else None
        return plan(event, to=to, product=product, site_url=self.brand.site_url)

    def _render(self, planned: PlannedEmail) -> EmailContent:
        props = planned.props
        if planned.kind == signin_link.KIND.name:
            # Made only when it is about to be sent: a new magic link voids the one before it;
            # the mail says until when it works, counted from now.
            lifetime = self.accounts.link_lifetime
            props = {
                **props,
                "signin_url": self.accounts.sign_in_link(email=planned.to),
                "link_expires_at": datetime.now(UTC) + timedelta(seconds=lifetime)
                if lifetime
                else None,
            }
        try:
            return render(planned.kind, props, brand=self.brand)
        except ValidationError as exc:
            # Bad data in the event never gets better: drop it loudly instead of retrying.
            raise InvalidEvent(f"cannot render {planned.kind}: {exc}") from exc

    def _send_claimed(self, claimed: Sequence[tuple[Event, PlannedEmail]]) -> Outcomes:
        """Send, then record: no transaction open while Resend is called (a slow send would
        hold one of the pooler's few server connections from every other service). The
        idempotency key makes a repeated send after a crash a no-op at Resend."""
        outcomes: Outcomes = {}
        sent: list[sent_emails.Sent] = []
        for n, (event, mail) in enumerate(claimed):
            try:
                sent.append(self._send(event, mail))
            except MailError as exc:
                # Not sent (Resend down or limiting): neither is the rest; their redeliveries
                # may claim them again at once.
                rest = claimed[n:]
                with contextlib.suppress(Exception):
                    sent_emails.release_many(self.db, [(e.id, m.kind) for e, m in rest])
                outcomes |= {e.id: exc for e, _ in rest}
                break
            except Exception as exc:  # that e-mail alone: dropped (InvalidEvent) or retried
                outcomes[event.id] = exc
        try:
            sent_emails.record_many(self.db, sent)
        except Exception as exc:
            # Sent but not recorded: the redeliveries send again with the same keys (Resend
            # answers with these sends) and record them. Should the release fail too, the
            # claims' lease runs out instead.
            with contextlib.suppress(Exception):
                sent_emails.release_many(self.db, [(s.event_id, s.kind) for s in sent])
            return outcomes | {s.event_id: exc for s in sent}
        return outcomes | {s.event_id: f"sent {s.kind}" for s in sent}

    def _send(self, event: Event, planned: PlannedEmail) -> sent_emails.Sent:
        """Render and send one claimed e-mail; InvalidEvent (its claim released) when it can
        never be sent, MailError when Resend failed (the caller releases the claims)."""
        try:
            content = self._render(planned)
        except Exception:
            # Nothing was sent (bad data, or no sign-in link to be had): the redelivery may
            # claim it again at once rather than after the lease.
            with contextlib.suppress(Exception):
                sent_emails.release(self.db, event_id=event.id, kind=planned.kind)
            raise
        try:
            result = send_email(
                self.mailer,
                to=planned.to,
                subject=content.subject,
                text=content.text,
                html=content.html,
                from_=self.senders.of(kind_of(planned.kind)),
                reply_to=self.reply_to,
                idempotency_key=f"{event.id}/{planned.kind}",
            )
        except (UndeliverableEmail, ValueError) as exc:
            # An address Resend refuses stays refused: drop it loudly instead of retrying.
            sent_emails.release(self.db, event_id=event.id, kind=planned.kind)
            raise InvalidEvent(f"cannot send {planned.kind}: {exc}") from exc
        provider_id = str(result.get("id")) if result.get("id") else None
        return sent_emails.Sent(event.id, planned.kind, planned.to, provider_id)


Outcomes = dict[str, str | Exception]


def _attempt(step: Callable[[], T]) -> T | Exception:
    """What `step` returned, or what it failed with."""
    try:
        return step()
    except Exception as exc:
        return exc


def _log_outcome(event: Event, outcome: str | Exception) -> None:
    if isinstance(outcome, Exception):
        return  # the bus logs a failed delivery with what it does about it
    verb, _, kind = outcome.partition(" ")
    fields = (
        outcome_fields(CONSUMER, event, verb, email_kind=kind)
        if verb in ("sent", "resent")  # an admin's resend: its kind too
        else outcome_fields(CONSUMER, event, outcome)
    )
    log.info("emails: %s %s -> %s", event.type, event.id, outcome, extra=fields)


def _recipient(profile: Profile | None) -> Recipient | None:
    if profile is None or not profile.email:
        return None
    return Recipient(email=profile.email, name=profile.name)
