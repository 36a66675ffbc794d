"""The local and test stand-in for Resend: each message a multipart .eml file in a folder."""

from __future__ import annotations

import email
import email.policy
import fcntl
import hashlib
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.charset import QP, Charset
from email.header import Header
from email.message import EmailMessage
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.parser import BytesHeaderParser
from email.utils import format_datetime, formataddr, make_msgid
from pathlib import Path
from typing import Any

from adapters.mail.message import OutgoingEmail, checked_key


class OutboxMailer:
    """Writes each message as a multipart .eml file: the local and test stand-in for Resend."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def send(self, email: OutgoingEmail, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Write one .eml atomically; a repeated idempotency key returns the first result."""
        key = checked_key(idempotency_key)
        self.directory.mkdir(parents=True, exist_ok=True)
        tag = _tag(key) if key else secrets.token_hex(8)
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

    def find(self, idempotency_key: str) -> Path | None:
        """The .eml written for `idempotency_key` (`<event id>/<kind>`), if any."""
        marker = self.directory / ".keys" / _tag(idempotency_key)
        try:
            return self.directory / marker.read_text()
        except FileNotFoundError:
            return None

    def sent_copy(self, *, provider_id: str | None, idempotency_key: str) -> OutgoingEmail | None:
        """The message written for `idempotency_key`, read back from its .eml."""
        del provider_id  # the outbox finds a message by its key
        path = self.find(idempotency_key)
        if path is None or not path.exists():
            return None
        parsed = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        text, html = (parsed.get_body(preferencelist=(kind,)) for kind in ("plain", "html"))
        reply_to = str(parsed.get("Reply-To") or "")
        return OutgoingEmail(
            to=tuple(a.strip() for a in str(parsed["To"]).split(",")),
            subject=str(parsed["Subject"]),
            text=str(text.get_content()) if isinstance(text, EmailMessage) else "",
            html=str(html.get_content()) if isinstance(html, EmailMessage) else "",
            from_=str(parsed["From"]),
            reply_to=tuple(a.strip() for a in reply_to.split(",") if a.strip()),
        )

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


def _tag(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _mime(email: OutgoingEmail, key: str | None) -> MIMEMultipart:
    # The compat32 classes: EmailMessage's default policy re-parses every header and costs
    # several times as much a message (bench/README.md), for the same .eml.
    # A random boundary of our own: else the generator searches both bodies for a safe one.
    message = MIMEMultipart("alternative", boundary=f"=_{secrets.token_hex(16)}")
    sender = email.sender
    message["From"] = formataddr((sender.display_name, sender.addr_spec), charset="utf-8")
    message["To"] = ", ".join(email.to)
    if email.reply_to:
        message["Reply-To"] = ", ".join(email.reply_to)
    subject = email.subject
    message["Subject"] = subject if subject.isascii() else Header(subject, "utf-8").encode()
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=sender.domain)
    if key:
        message["X-Idempotency-Key"] = key
    message.attach(_part(email.text, "plain"))
    message.attach(_part(email.html, "html"))
    return message


def _part(body: str, subtype: str) -> MIMEText:
    # Readable 8-bit bodies, as EmailMessage wrote them; quoted-printable only for a line
    # longer than SMTP's 998 characters.
    charset = Charset("utf-8")
    long_line = any(len(line) > 998 for line in body.splitlines())
    charset.body_encoding = QP if long_line else None  # type: ignore[assignment]  # None: 8bit
    return MIMEText(body, subtype, charset)  # type: ignore[arg-type]  # a Charset is accepted


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
