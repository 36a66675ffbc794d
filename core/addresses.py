"""Address rules used everywhere: an e-mail address we can deliver to, a web link we may show."""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

# RFC 5321's limits, which email-validator does not apply to the local part.
MAX_LOCAL_PART = 64
MAX_ADDRESS = 254
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


@lru_cache(maxsize=4096)  # every send checks the same few senders and recent recipients
def email_address(value: str) -> str:
    """A deliverable address, normalised; ValueError with the reason otherwise.

    ASCII before the @ only (no SMTPUTF8): Resend refuses the rest, so a route that accepted
    it would promise a mail that can never be sent. No DNS look-up: this runs inline.
    """
    if _CONTROL.search(value):
        raise ValueError("Invalid email address: it contains line breaks or control characters")
    # On first use: email-validator compiles its grammar's patterns on import (about 20 ms of CPU),
    # which a process's start-up need not wait for.
    from email_validator import EmailNotValidError, validate_email

    try:
        found = validate_email(value, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        raise ValueError(f"Invalid email address: {exc}") from exc
    address = found.ascii_email or found.normalized
    if len(found.local_part) > MAX_LOCAL_PART or len(address) > MAX_ADDRESS:
        raise ValueError(
            f"Invalid email address: at most {MAX_LOCAL_PART} characters before the @"
            f" and {MAX_ADDRESS} in all"
        )
    return address


def web_url(value: str) -> str:
    """An absolute http(s) URL; anything else (javascript:, data:, relative) is refused."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http(s) URL")
    return value
