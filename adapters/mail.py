"""Sending e-mail: Resend in production, an outbox of .eml files elsewhere. No content here."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from email_validator import EmailNotValidError, validate_email

if TYPE_CHECKING:
    import resend

    from config import Settings

log = logging.getLogger(__name__)

DEFAULT_RESEND_API_URL = "https://api.resend.com"
MAX_IDEMPOTENCY_KEY = 256  # Resend's limit
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
_DISPLAY_FORM = re.compile(r"^\s*(?P<name>[^<>]*?)\s*<(?P<addr>[^<>]+)>\s*$")


class MailError(RuntimeError):
    """The e-mail provider refused or failed to send a message."""


def _single_line(value: str, what: str) -> str:
    # A CR or LF in a header value would let the caller write extra headers (header injection).
    if _CONTROL.search(value):
        raise ValueError(f"{what} must not contain line breaks or control characters")
    return value


def _valid_address(value: str, what: str) -> str:
    _single_line(value, what)
    try:
        # No DNS lookups: this runs inline, and deliverability is the provider's business.
        validate_email(value, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
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


def _checked_key(key: str | None) -> str | None:
    if key is None:
        return None
    _single_line(key, "idempotency_key")
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValueError(f"idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY} characters")
    return key


# The resend SDK keeps its key and base URL in module globals read during each request.
_RESEND_LOCK = threading.Lock()


class ResendMailer:
    """Sends through Resend's API with the official SDK."""

    def __init__(self, api_key: str, api_url: str | None = None) -> None:
        if not api_key:
            raise ValueError("ResendMailer needs an API key")
        self._api_key = api_key
        self._api_url = (api_url or DEFAULT_RESEND_API_URL).rstrip("/")

    def __repr__(self) -> str:
        return f"ResendMailer(api_url={self._api_url!r})"

    def send(self, email: OutgoingEmail, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Send one message; a Resend error is logged and raised as MailError."""
        import resend  # on first use: the SDK adds about 0.4 s to a cold start

        key = _checked_key(idempotency_key)
        options: resend.Emails.SendOptions = {"idempotency_key": key} if key else {}
        # Held for the whole request so another mailer's key never leaks into it; Resend's
        # rate limit (a few requests per second per team) makes the serialization free.
        with _RESEND_LOCK:
            resend.api_key, resend.api_url = self._api_key, self._api_url
            try:
                response = resend.Emails.send(_resend_params(email), options)
            except resend.exceptions.ResendError as exc:
                log.error(
                    "resend refused e-mail %r to %d recipient(s): %s (%s, HTTP %s)",
                    email.subject,
                    len(email.to),
                    exc.message,
                    exc.error_type,
                    exc.code,
                )
                raise MailError(f"Resend error {exc.code}: {exc.message}") from exc
        return {k: v for k, v in dict(response).items() if k != "http_headers"}


def _resend_params(email: OutgoingEmail) -> resend.Emails.SendParams:
    params: resend.Emails.SendParams = {
        "from": email.from_,
        "to": list(email.to),
        "subject": email.subject,
        "html": email.html,
        "text": email.text,
    }
    if email.reply_to:
        params["reply_to"] = list(email.reply_to)
    return params


class OutboxMailer:
    """Writes each message as a multipart .eml file: the local and test stand-in for Resend."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def send(self, email: OutgoingEmail, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Write one .eml atomically; a repeated idempotency key returns the first result."""
        key = _checked_key(idempotency_key)
        self.directory.mkdir(parents=True, exist_ok=True)
        tag = hashlib.sha256(key.encode()).hexdigest()[:16] if key else secrets.token_hex(8)
        # One small marker per key: finding an earlier send stays O(1) as the outbox grows.
        marker = self.directory / ".keys" / tag
        with self._locked():
            if key and marker.exists():
                return _outbox_result(self.directory / marker.read_text())
            message = _mime(email, key)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            path = self.directory / f"{stamp}-{tag}.eml"
            _write_atomically(path, message.as_bytes())
            if key:
                marker.parent.mkdir(exist_ok=True)
                _write_atomically(marker, path.name.encode())
        return {"id": _bare_id(message["Message-ID"]), "path": str(path)}

    def messages(self) -> list[Path]:
        """The written .eml files, oldest first."""
        return sorted(self.directory.glob("*.eml"))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        # Several processes (API workers, subscribers) may share one outbox: an flock makes the
        # check-then-write of idempotency keys atomic across them.
        with open(self.directory / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _mime(email: OutgoingEmail, key: str | None) -> EmailMessage:
    message = EmailMessage()
    sender = email.sender
    message["From"] = sender
    message["To"] = ", ".join(email.to)
    if email.reply_to:
        message["Reply-To"] = ", ".join(email.reply_to)
    message["Subject"] = email.subject
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=sender.domain)
    if key:
        message["X-Idempotency-Key"] = key
    message.set_content(email.text)
    message.add_alternative(email.html, subtype="html")
    return message


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        # Rename makes it atomic (no reader sees half a file); an outbox needs no fsync.
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _outbox_result(path: Path) -> dict[str, Any]:
    with path.open("rb") as file:
        headers = BytesHeaderParser().parse(file)
    return {"id": _bare_id(str(headers["Message-ID"])), "path": str(path)}


def _bare_id(message_id: str) -> str:
    return message_id.strip().strip("<>")


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


def build_mailer(settings: Settings) -> Mailer:
    """Resend when RESEND_API_KEY is set, else the outbox folder; builds no client yet."""
    if settings.resend_api_key is not None:
        api_url = str(settings.resend_api_url) if settings.resend_api_url else None
        return ResendMailer(settings.resend_api_key.get_secret_value(), api_url)
    return OutboxMailer(settings.email_outbox_dir)
