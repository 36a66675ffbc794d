"""The test route's work: every requested kind rendered with sample data and sent."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapters.db import profiles
from adapters.db.pool import Database
from adapters.mail.message import Mailer, MailError, send_email
from adapters.tokens import User
from api.identity import require_user
from catalogue import store as products
from catalogue.rules import EmailProduct
from core.errors import Forbidden
from emails.kind import Senders
from emails.kinds import kind_of
from emails.render import Brand, render

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    type: str
    status: str


def recipient(
    *,
    requested: str | None,
    support_email: str,
    admin_only: bool,
    user: User | None,
    db: Database,
) -> str:
    """Where samples may go: by default the support inbox; in production, for an admin only,
    and only to that admin or the support inbox, so the route cannot mail strangers."""
    to = requested or support_email
    if not admin_only:
        return to
    profile = profiles.by_id(db, require_user(user).id)
    if profile is None or not profile.is_admin:
        raise Forbidden("Test e-mails are for admins")
    allowed = {support_email.lower(), (profile.email or support_email).lower()}
    if to.lower() not in allowed:
        raise Forbidden("Test e-mails go only to your own address or SUPPORT_EMAIL")
    return to


def catalogue_product(db: Database) -> EmailProduct | None:
    """The product the samples name: the synced catalogue's first (featured first, then by
    price); None while it has none (the samples name their own)."""
    found = products.active_products(db)
    return found[0].facts() if found else None


def send_samples(
    *,
    kinds: tuple[str, ...],
    to: str,
    mailer: Mailer,
    brand: Brand,
    senders: Senders,
    reply_to: str,
    product: EmailProduct | None = None,
) -> list[Result]:
    """Send one sample of each kind to `to`, from the kind's own sender, its links on the
    brand's site (SITE_URL), about `product` when given; a provider failure is reported, not
    raised."""
    results = []
    for kind in kinds:
        registered = kind_of(kind)
        props = registered.sample_props(brand.site_url, product)
        content = render(kind, props, brand=brand)
        try:
            send_email(
                mailer,
                to=to,
                subject=content.subject,
                text=content.text,
                html=content.html,
                from_=senders.of(registered),
                reply_to=reply_to,
            )
        except MailError as exc:
            log.error("test e-mail %s to %s failed: %s", kind, to, exc)
            results.append(Result(kind, "failed"))
            continue
        results.append(Result(kind, "sent"))
    return results
