"""The test route's work: every requested kind rendered with sample data and sent."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapters.mail.message import Mailer, MailError, send_email
from core.email.render import Brand, render
from core.email.samples import sample_props

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    type: str
    status: str


def send_samples(
    *, kinds: tuple[str, ...], to: str, mailer: Mailer, brand: Brand, sender: str, reply_to: str
) -> list[Result]:
    """Send one sample of each kind to `to`; a provider failure is reported, not raised."""
    results = []
    for kind in kinds:
        content = render(kind, sample_props(kind), brand=brand)
        try:
            send_email(
                mailer,
                to=to,
                subject=content.subject,
                text=content.text,
                html=content.html,
                from_=sender,
                reply_to=reply_to,
            )
        except MailError as exc:
            log.error("test e-mail %s to %s failed: %s", kind, to, exc)
            results.append(Result(kind, "failed"))
            continue
        results.append(Result(kind, "sent"))
    return results
