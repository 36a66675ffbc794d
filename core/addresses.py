"""Address rules used everywhere: an e-mail address we can deliver to, a web link we may show,
and whether text someone wrote carries either."""

from __future__ import annotations

import hashlib
import re
import unicodedata
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
    # On first use: email-validator compiles its grammar's patterns on import, which a
    # process's start-up need not wait for (bench/coldstart.py).
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


# What a mail client or a reader takes for a link or an address in plain text: a scheme
# (`https://`, `http:/`), `www.`, a bare domain (`evil.com`, `example.co/path`, any script's
# letters in the last label, or a last label in punycode: `evil.xn--p1ai` is `evil.рф`), an IP
# address (`1.2.3.4/login`, `[2001:db8::1]`), or `someone@somewhere`. Read on the NFKC form with
# the ideographic full stop as a dot and the joiners taken out, so a domain in full-width
# letters, or with U+3002 for its dot, is a domain too.
_SCHEME = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*:/", re.IGNORECASE)
_WWW = re.compile(r"(?<![\w-])www\d{0,3}\.", re.IGNORECASE)
_DOMAIN = re.compile(
    r"(?<![\w-])(?:[^\W_](?:[\w-]*[^\W_])?\.)+(?:[^\W\d_]{2,63}|(?i:xn--)[\w-]{1,59})(?![\w-])"
)
_IPV4 = re.compile(r"(?<![\w.-])\d{1,3}(?:\.\d{1,3}){3}(?![\w-]|\.\d)")
_IPV6 = re.compile(r"\[[0-9a-f]*:[0-9a-f:.]*\]", re.IGNORECASE)
_AT = re.compile(r"[^\s@]@[^\s@]")
_AS_DOT = str.maketrans({"\u3002": ".", "\u200c": None, "\u200d": None})


def carries_address(text: str) -> bool:
    """Whether `text` holds a link, a domain name or an e-mail address. For short text (a name):
    the time it takes grows with the square of the length."""
    plain = unicodedata.normalize("NFKC", text).translate(_AS_DOT)
    return any(p.search(plain) for p in (_SCHEME, _WWW, _DOMAIN, _IPV4, _IPV6, _AT))


# Characters that change how text around them reads without being seen: controls, line and
# paragraph breaks, bidirectional overrides and other format characters (the zero-width
# joiners excepted: emoji and several scripts need them), surrogates and private use.
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}
_JOINERS = {"\u200c", "\u200d"}


def has_hidden_characters(text: str) -> bool:
    """Whether `text` holds control, format or line-break characters."""
    return any(unicodedata.category(c) in _HIDDEN and c not in _JOINERS for c in text)


_ADDRESS_LIKE = re.compile(r"[^\s@&=?/]+@[^\s@&=?/]+")


def digest_addresses(text: str) -> str:
    """`text` with every e-mail address (or part of one) in it replaced by the SHA-256 of its
    lower-case form: a log kept for good (the admin audit) outlives a person's deletion without
    keeping their address, and a founder can still check whether an address was looked up."""
    return _ADDRESS_LIKE.sub(
        lambda m: "sha256:" + hashlib.sha256(m.group(0).lower().encode()).hexdigest(), text
    )
