"""Send the e-mail each event calls for, at most once per (event, kind)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from adapters.accounts import Accounts
from adapters.db import sent_emails
from adapters.db.pool import Database
from adapters.db.products import Product
from adapters.db.profiles import Profile
from adapters.mail.message import Mailer, MailError, UndeliverableEmail, send_email
from core.email.kinds import kind_of
from core.email.plan import (
    SIGNIN_LINK,
    PlannedEmail,
    ProductFacts,
    Recipient,
    customer_of,
    plan,
    price_of,
    recipient_in,
)
from core.email.render import Brand, EmailContent, render
from core.events import Event, InvalidEvent
from subscribers.envelope import outcome_fields

log = logging.getLogger(__name__)

CONSUMER = "emails"


@dataclass(frozen=True)
class EmailSubscriber:
    """Renders and sends; the (event, kind) row and Resend's idempotency key prevent repeats."""

    db: Database
    mailer: Mailer
    brand: Brand
    accounts: Accounts
    sender: str
    noreply_sender: str
    reply_to: str

    def __call__(self, event: Event) -> str:
        # An event calls for one e-mail at most, so whether it was mailed is read with what
        # planning needs, in one round trip: a redelivery of one already mailed ends there.
        facts = sent_emails.look_up(
            self.db, event_id=event.id, customer_id=customer_of(event), price_id=price_of(event)
        )
        if facts.sent:
            outcome = "duplicate"
        else:
            planned = self._plan(event, facts)
            outcome = self._send_once(event, planned) if planned else "no e-mail"
        verb, _, kind = outcome.partition(" ")
        fields = (
            outcome_fields(CONSUMER, event, verb, email_kind=kind)
            if verb == "sent"
            else outcome_fields(CONSUMER, event, outcome)
        )
        log.info("emails: %s %s -> %s", event.type, event.id, outcome, extra=fields)
        return outcome

    def _plan(self, event: Event, facts: sent_emails.Facts) -> PlannedEmail | None:
        to = recipient_in(event)
        if to is None or to.name is None:
            # Stripe's object often names nobody: the profile's address, or its name for the
            # greeting when it is the same person.
            known = _recipient(facts.profile)
            if to is None or (known and known.name and known.email.lower() == to.email.lower()):
                to = known
        if to is None:
            return None
        product = _product_facts(facts.product)
        return plan(event, to=to, product=product, site_url=self.brand.site_url)

    def _render(self, planned: PlannedEmail) -> EmailContent:
        props = planned.props
        if planned.kind == SIGNIN_LINK:
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

    def _send_once(self, event: Event, planned: PlannedEmail) -> str:
        """Claim, send, record: three steps, no transaction open while Resend is called (a
        slow send would hold one of the pooler's few server connections from every other
        service). The idempotency key makes a repeated send after a crash a no-op at Resend."""
        holder = uuid.uuid4().hex  # this delivery: the claim may be sent twice, not taken twice
        if not sent_emails.claim(self.db, event_id=event.id, kind=planned.kind, holder=holder):
            return "duplicate"
        content = self._render(planned)
        try:
            result = send_email(
                self.mailer,
                to=planned.to,
                subject=content.subject,
                text=content.text,
                html=content.html,
                from_=self.noreply_sender if kind_of(planned.kind).noreply else self.sender,
                reply_to=self.reply_to,
                idempotency_key=f"{event.id}/{planned.kind}",
            )
        except (UndeliverableEmail, ValueError) as exc:
            # An address Resend refuses stays refused: drop it loudly instead of retrying.
            sent_emails.release(self.db, event_id=event.id, kind=planned.kind)
            raise InvalidEvent(f"cannot send {planned.kind}: {exc}") from exc
        except MailError:
            # Not sent (Resend down or limiting): the redelivery may claim it again at once.
            sent_emails.release(self.db, event_id=event.id, kind=planned.kind)
            raise
        try:
            sent_emails.record(
                self.db,
                event_id=event.id,
                kind=planned.kind,
                recipient=planned.to,
                provider_id=str(result.get("id")) if result.get("id") else None,
            )
        except Exception:
            # Sent but not recorded: the redelivery sends again with the same key (Resend
            # answers with this send) and records it. Should the release fail too, the claim's
            # lease runs out instead.
            with contextlib.suppress(Exception):
                sent_emails.release(self.db, event_id=event.id, kind=planned.kind)
            raise
        return f"sent {planned.kind}"


def _recipient(profile: Profile | None) -> Recipient | None:
    if profile is None or not profile.email:
        return None
    return Recipient(email=profile.email, name=profile.name)


def _product_facts(product: Product | None) -> ProductFacts | None:
    if product is None:
        return None
    return ProductFacts(
        name=product.name,
        type=product.type,
        billing=product.billing_interval or "one_time",
        download_url=product.download_url,
        github_repo=product.github_repo,
    )
