"""Field rules shared by request models."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from email_validator import EmailNotValidError, validate_email


def required_text(value: Any, message: str) -> str:
    """A non-empty string, or `message`."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(message)
    return value.strip()


def email_address(value: str) -> str:
    """A syntactically valid address, normalised (no DNS look-up)."""
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise ValueError(f"Invalid email address: {exc}") from exc


def absolute_url(value: Any, name: str, *, origin: str | None) -> str:
    """An absolute http(s) URL, on `origin` when one is configured."""
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an absolute http(s) URL")
    if origin and f"{parts.scheme}://{parts.netloc}".lower() != origin.lower():
        raise ValueError(f"{name} must be on {origin}")
    return str(value)
