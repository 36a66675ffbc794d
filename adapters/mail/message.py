"""The mail port: one validated message, the `Mailer` that delivers it, and `send_email`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.headerregistry import Address
from typing import Any, Protocol, runtime_checkable

from core.addresses import email_address

MAX_IDEMPOTENCY_KEY = 256  # Resend's limit
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
_DISPLAY_FORM = re.compile(r"^\s*(?P<name>[^<>]*?)\s*<(?P<addr>[^<>]+)>\s*$")


class MailError(RuntimeError):
    """The e-mail provider refused or failed to send a message."""


class UndeliverableEmail(MailError):
    """The provider refused the message itself (invalid address, bad field): it never will."""


def _single_line(value: str, what: str) -> str:
    # A CR or LF in a header value would let the caller write extra headers (header injection).
    if _CONTROL.search(value):
        raise ValueError(f"{what} must not contain line breaks or control characters")
    return value


def _valid_address(value: str, what: str) -> str:
    try:
        email_address(value)
    except ValueError as exc:
        raise ValueError(f"{what} is not a valid e-mail address: {value!r} ({exc})") from None
    return value


def _sender(value: str) -> Address:
    """The From value, plain or in 'Name <addr>' form, as a structured address."""
    _single_line(value, "from_")
    match = _DISPLAY_FORM.fullmatch(value)
    name, addr = (match["name"].strip('" '), match["addr"]) if match else ("", value.strip())
    _valid_address(addr, "from_")
    local, _, domain = addr.rpartition("@")
    return Address(display_name=name, username=local, domain=domain)


@dataclass(frozen=True)
class OutgoingEmail:
    """One message, validated on construction so that no transport sees a bad header."""

    to: tuple[str, ...]
    subject: str
    text: str
    html: str
    from_: str
    reply_to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.to, str) or isinstance(self.reply_to, str):
            raise TypeError("to and reply_to are tuples of addresses; send_email accepts a str")
        if not self.to:
            raise ValueError("an e-mail needs at least one recipient")
        if not self.subject.strip():
            raise ValueError("an e-mail needs a subject")
        _single_line(self.subject, "subject")
        for address in self.to:
            _valid_address(address, "to")
        for address in self.reply_to:
            _valid_address(address, "reply_to")
        _sender(self.from_)

    @property
    def sender(self) -> Address:
        """The From address with its display name."""
        return _sender(self.from_)


class Mailer(Protocol):
    """Anything that can deliver an OutgoingEmail."""

    def send(self, email: OutgoingEmail, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Send and return the provider's result data, at least {"id": ...}."""
        ...


@runtime_checkable
class KeepsSent(Protocol):
    """A mailer that can read back a message it sent (the support API sends one again)."""

    def sent_copy(self, *, provider_id: str | None, idempotency_key: str) -> OutgoingEmail | None:
        """The message as it was sent (by the provider's id, or the key it was sent under);
        None when the provider no longer has it. MailError when the provider fails."""
        ...


def checked_key(key: str | None) -> str | None:
    """An idempotency key a provider accepts, or ValueError."""
    if key is None:
        return None
    _single_line(key, "idempotency_key")
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValueError(f"idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY} characters")
    return key


def _addresses(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def send_email(
    mailer: Mailer,
    *,
    to: str | Sequence[str],
    subject: str,
    text: str,
    html: str,
    from_: str,
    reply_to: str | Sequence[str] | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Validate and send one e-mail; returns the provider's result data, raises MailError."""
    email = OutgoingEmail(
        to=_addresses(to),
        subject=subject,
        text=text,
        html=html,
        from_=from_,
        reply_to=_addresses(reply_to),
    )
    return mailer.send(email, idempotency_key=idempotency_key)
