"""Field rules shared by request models (the address rules themselves live in core.addresses)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from core.addresses import web_url


def required_text(value: Any, message: str) -> str:
    """A non-empty string, or `message`."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(message)
    return value.strip()


def absolute_url(value: Any, name: str, *, origin: str | None) -> str:
    """An absolute http(s) URL, on `origin` when one is configured."""
    try:
        url = web_url(value) if isinstance(value, str) else None
    except ValueError:
        url = None
    if url is None:
        raise ValueError(f"{name} must be an absolute http(s) URL")
    parts = urlsplit(url)
    if origin and f"{parts.scheme}://{parts.netloc}".lower() != origin.lower():
        raise ValueError(f"{name} must be on {origin}")
    return url
