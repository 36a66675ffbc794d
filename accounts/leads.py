"""A lead's removal link: signed with the site's key, so only the mails we sent carry one, and
never expiring, as an unsubscribe link in an old mail must still work."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import urlencode

REMOVAL_PATH = "/api/leads/remove"
# RFC 8058: the body a mail client's one-click unsubscribe POSTs.
ONE_CLICK = "List-Unsubscribe=One-Click"


def removal_token(key: str, email: str) -> str:
    """The address's token: HMAC-SHA256 under `key`, over a purpose label and the address as
    stored (lower case, no surrounding spaces), so no other signature of ours passes as one."""
    message = b"lead-removal\n" + email.strip().lower().encode()
    digest = hmac.new(key.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def token_matches(key: str, email: str, token: str) -> bool:
    """Compared in constant time, as bytes: a token is whatever a link's holder typed."""
    return hmac.compare_digest(removal_token(key, email).encode(), token.encode())


def removal_link(origin: str, key: str, email: str) -> str:
    """The link a mail to a lead carries (and its List-Unsubscribe header names)."""
    query = urlencode({"email": email.strip().lower(), "token": removal_token(key, email)})
    return f"{origin.rstrip('/')}{REMOVAL_PATH}?{query}"


def unsubscribe_headers(link: str) -> dict[str, str]:
    """RFC 8058's headers for a mail to a lead: a client's one-click unsubscribe POSTs to the
    link, which removes the lead; a GET (a scanner's prefetch) only shows a page."""
    return {"List-Unsubscribe": f"<{link}>", "List-Unsubscribe-Post": ONE_CLICK}
