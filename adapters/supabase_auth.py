"""Supabase Auth: PKCE code exchange (supabase-py) and the session cookies `@supabase/ssr` reads."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

log = logging.getLogger(__name__)

BASE64_PREFIX = "base64-"
# @supabase/ssr splits cookie values longer than this into `name.0`, `name.1`, ...
CHUNK_SIZE = 3180
# @supabase/ssr's default lifetime for its cookies.
COOKIE_MAX_AGE = 400 * 24 * 60 * 60


@dataclass(frozen=True)
class Cookie:
    name: str
    value: str


def storage_key(supabase_url: str) -> str:
    """The cookie name supabase-js derives from the project URL."""
    host = urlsplit(supabase_url).hostname or ""
    return f"sb-{host.split('.')[0]}-auth-token"


def encode_value(data: Any) -> str:
    """A value as supabase-js stores it: JSON, base64url, prefixed."""
    raw = json.dumps(data, separators=(",", ":")).encode()
    return BASE64_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_value(value: str) -> Any:
    """The inverse of `encode_value`; plain (older) JSON values are accepted too.

    Any cookie a stranger sends arrives here: every way it can be wrong is a ValueError. orjson
    refuses nesting past its limit as malformed JSON, where `json` would overflow the stack.
    """
    raw: bytes | str = value
    if value.startswith(BASE64_PREFIX):
        body = value[len(BASE64_PREFIX) :]
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))  # binascii.Error: ValueError
    return orjson.loads(raw)  # bad UTF-8 too is an orjson.JSONDecodeError, a ValueError


def session_cookies(key: str, session: Mapping[str, Any]) -> list[Cookie]:
    """The cookie (or chunked cookies) that carry a session."""
    value = encode_value(session)
    if len(value) <= CHUNK_SIZE:
        return [Cookie(key, value)]
    chunks = [value[i : i + CHUNK_SIZE] for i in range(0, len(value), CHUNK_SIZE)]
    return [Cookie(f"{key}.{n}", chunk) for n, chunk in enumerate(chunks)]


def read_session(key: str, cookies: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The session stored in request cookies, whole or chunked; None when absent or unreadable."""
    value = cookies.get(key)
    if value is None:
        numbered = sorted(
            (int(m.group(1)), v)
            for name, v in cookies.items()
            # A few chunks fill a request's headers: a longer number is no chunk of ours.
            if (m := re.fullmatch(re.escape(key) + r"\.([0-9]{1,3})", name))
        )
        value = "".join(v for _, v in numbered) or None
    if value is None:
        return None
    try:
        session = decode_value(value)
    except ValueError:
        return None
    return session if isinstance(session, Mapping) else None


class SupabaseAuth:
    """Code exchange against the project's Auth server."""

    def __init__(self, *, url: str | None, anon_key: str | None, timeout: float) -> None:
        self._timeout = timeout
        self._url = url.rstrip("/") if url else None
        self._anon_key = anon_key

    @property
    def configured(self) -> bool:
        return bool(self._url and self._anon_key)

    @property
    def cookie_name(self) -> str:
        return storage_key(self._url or "http://local")

    def exchange_code(self, *, code: str, code_verifier: str | None) -> dict[str, Any] | None:
        """The session for a PKCE code, or None when the exchange fails (logged)."""
        if not self.configured:
            log.warning(
                "sign-in code received but SUPABASE_URL/SUPABASE_PUBLISHABLE_KEY are not set"
            )
            return None
        # The SDK (costly to import) on the first exchange, not at every start-up.
        import httpx
        from supabase_auth import SyncGoTrueClient, SyncMemoryStorage
        from supabase_auth.errors import AuthError

        # A fresh client per exchange: the SDK keeps the session in the client's storage.
        http = httpx.Client(timeout=self._timeout)
        client = SyncGoTrueClient(
            http_client=http,
            url=f"{self._url}/auth/v1",
            headers={"apikey": str(self._anon_key), "Authorization": f"Bearer {self._anon_key}"},
            storage=SyncMemoryStorage(),
            flow_type="pkce",
            auto_refresh_token=False,
            persist_session=False,
        )
        try:
            response = client.exchange_code_for_session(
                {"auth_code": code, "code_verifier": code_verifier or "", "redirect_to": ""}
            )
        except AuthError as exc:
            log.warning("sign-in code exchange failed: %s", exc.message)
            return None
        except httpx.HTTPError as exc:
            log.warning("sign-in code exchange failed: Supabase Auth unreachable (%s)", exc)
            return None
        finally:
            http.close()
        if response.session is None:
            log.warning("sign-in code exchange returned no session")
            return None
        return response.session.model_dump(mode="json", exclude_none=True)
