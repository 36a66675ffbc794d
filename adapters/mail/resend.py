"""Mail through Resend's API with the official SDK: paced to the account's rate, retried on
429 and 5xx (honouring Retry-After), given up on at once when the message itself is refused."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from adapters.mail.message import MailError, OutgoingEmail, UndeliverableEmail, checked_key

if TYPE_CHECKING:
    import resend

    from adapters.mail.resend_http import KeptAliveClient

log = logging.getLogger(__name__)

DEFAULT_RESEND_API_URL = "https://api.resend.com"
# Refusals of the message itself: sending it again cannot succeed.
PERMANENT = frozenset({400, 422})
MAX_ATTEMPTS = 3
# A Retry-After longer than this is not waited for here: the subscriber fails and Pub/Sub
# redelivers later, instead of a push outliving its acknowledgement deadline.
MAX_WAIT_SECONDS = 5.0
# Connections kept open to Resend per mailer: the sends a process has in flight at most (its
# threads); more are opened when needed and closed after.
POOL_SIZE = 16


class SdkGlobals:
    """The resend SDK reads its key, base URL and HTTP client from module globals on each
    request. Sends under one configuration (a process has one mailer) run side by side; a
    mailer with another configuration waits until those in flight are done, then sets its own."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._current: tuple[object, ...] | None = None
        self._in_flight = 0

    @contextmanager
    def using(self, config: tuple[object, ...], apply: Callable[[], None]) -> Iterator[None]:
        with self._changed:
            while self._current != config and self._in_flight:
                self._changed.wait()
            if self._current != config:
                apply()
                self._current = config
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                if not self._in_flight:
                    self._changed.notify_all()


_SDK = SdkGlobals()


class Pacer:
    """Spaces request starts at least 1/rate seconds apart, across threads; learns the rate and
    the window's state from Resend's `ratelimit-*` headers (IETF draft fields), so the
    configured rate is only where it starts."""

    # A tenth more than 1/rate: the provider counts arrivals, and network jitter can bring two
    # requests sent exactly 1/rate apart closer together than that.
    MARGIN = 1.1
    # Resend counts requests per second per team (its API reference, "Rate limit").
    WINDOW_SECONDS = 1.0

    def __init__(self, rate_per_second: float) -> None:
        self._interval = self.MARGIN / rate_per_second
        self._last = -float("inf")
        self._not_before = 0.0
        self._lock = threading.Lock()

    @property
    def rate(self) -> float:
        """Request starts per second, as paced now."""
        return self.MARGIN / self._interval

    def wait(self) -> None:
        # Spaced by when requests really start, not by slots handed out beforehand: a thread
        # that wakes late (a busy machine) would otherwise start right before the next slot's.
        while True:
            with self._lock:
                now = time.monotonic()
                start = max(self._last + self._interval, self._not_before)
                if now >= start:
                    self._last = now
                    return
            time.sleep(start - now)

    def observe(self, headers: Mapping[str, Any] | None) -> None:
        """Take the account's limit from an answer: `ratelimit-limit` requests per window; with
        `ratelimit-remaining` at 0, nothing starts before `ratelimit-reset` seconds."""
        found = {str(k).lower(): v for k, v in (headers or {}).items()}
        limit = _number(found.get("ratelimit-limit"))
        remaining = _number(found.get("ratelimit-remaining"))
        reset = _number(found.get("ratelimit-reset"))
        with self._lock:
            if limit and limit > 0:
                self._interval = self.MARGIN * self.WINDOW_SECONDS / limit
            if remaining == 0 and reset is not None:
                self._not_before = max(self._not_before, time.monotonic() + reset)


class ResendMailer:
    """Sends through Resend's API with the official SDK."""

    def __init__(
        self, api_key: str, api_url: str | None = None, *, timeout: float, rate_per_second: float
    ) -> None:
        if not api_key:
            raise ValueError("ResendMailer needs an API key")
        self._api_key = api_key
        self._api_url = (api_url or DEFAULT_RESEND_API_URL).rstrip("/")
        self._timeout = timeout
        self._pacer = Pacer(rate_per_second)
        self._client: KeptAliveClient | None = None  # built with the first send

    def __repr__(self) -> str:
        return f"ResendMailer(api_url={self._api_url!r})"

    def send(self, email: OutgoingEmail, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Send one message; MailError when Resend fails, UndeliverableEmail when it refuses."""
        key = checked_key(idempotency_key)
        # Loaded before the pacer gives this send its slot: a first send spending its slot on
        # the import would start late, next to the sends paced after it.
        import adapters.mail.resend_http  # noqa: F401  (the SDK too)

        for attempt in range(1, MAX_ATTEMPTS + 1):
            self._pacer.wait()
            try:
                return self._post(email, key)
            except _Retryable as retry:
                wait = retry.wait if retry.wait is not None else 0.5 * 2 ** (attempt - 1)
                fields = _log_fields(retry.status)
                if attempt == MAX_ATTEMPTS or wait > MAX_WAIT_SECONDS:
                    log.error(
                        "resend: %s; giving up after %d attempt(s)",
                        retry.message,
                        attempt,
                        extra=fields,
                    )
                    raise MailError(retry.message) from retry
                log.warning("resend: %s; retrying in %.1fs", retry.message, wait, extra=fields)
                time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _post(self, email: OutgoingEmail, key: str | None) -> dict[str, Any]:
        import resend  # on first use: the SDK slows a cold start (bench/coldstart.py)

        options: resend.Emails.SendOptions = {"idempotency_key": key} if key else {}
        # The mailer itself too: its HTTP client (pool, CA bundle) goes with it.
        with _SDK.using((self._api_key, self._api_url, self._timeout, self), self._configure):
            try:
                response = dict(resend.Emails.send(_resend_params(email), options))
            except resend.exceptions.ResendError as exc:
                self._pacer.observe(exc.headers)
                raise _classified(exc, email) from exc
        headers = response.get("http_headers")
        self._pacer.observe(headers if isinstance(headers, Mapping) else None)
        return {k: v for k, v in response.items() if k != "http_headers"}

    def sent_copy(self, *, provider_id: str | None, idempotency_key: str) -> OutgoingEmail | None:
        """The message as Resend keeps it (`GET /emails/{id}`); None when Resend has no such
        e-mail. MailError when Resend fails."""
        del idempotency_key  # Resend finds a message by its id
        if not provider_id:
            return None
        import resend

        with _SDK.using((self._api_key, self._api_url, self._timeout, self), self._configure):
            try:
                found: dict[str, Any] = dict(resend.Emails.get(provider_id))
            except resend.exceptions.ResendError as exc:
                if _status(exc.code) == 404:
                    return None
                raise MailError(f"resend: reading {provider_id} failed: {exc}") from exc
        return OutgoingEmail(
            to=_listed(found.get("to")),
            subject=str(found.get("subject") or ""),
            text=str(found.get("text") or ""),
            html=str(found.get("html") or ""),
            from_=str(found.get("from") or ""),
            reply_to=_listed(found.get("reply_to")),
        )

    def _configure(self) -> None:
        import resend

        from adapters.mail.resend_http import KeptAliveClient

        if self._client is None:
            self._client = KeptAliveClient(self._timeout, connections=POOL_SIZE, url=self._api_url)
        resend.api_key, resend.api_url = self._api_key, self._api_url
        resend.default_http_client = self._client


def _listed(value: Any) -> tuple[str, ...]:
    """Resend's address fields: a list of strings, one string, or null."""
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value or ())


class _Retryable(Exception):
    def __init__(self, message: str, wait: float | None, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.wait = wait
        self.status = status


def _log_fields(status: int) -> dict[str, object]:
    """What the log-based metrics (ops/monitoring) count Resend's answers by."""
    return {"stage": "resend", "resend_status": status}


def _classified(exc: resend.exceptions.ResendError, email: OutgoingEmail) -> Exception:
    status = _status(exc.code)
    message = f"Resend error {exc.code}: {exc.message}"
    if status == 429 or status >= 500:
        return _Retryable(message, _retry_after(exc.headers), status)
    log.error(
        "resend refused e-mail %r to %d recipient(s): %s (%s, HTTP %s)",
        email.subject,
        len(email.to),
        exc.message,
        exc.error_type,
        exc.code,
        extra=_log_fields(status),
    )
    if status in PERMANENT:
        return UndeliverableEmail(message)
    return MailError(message)


def _status(code: object) -> int:
    try:
        return int(str(code))
    except ValueError:
        return 500


def _number(value: Any) -> float | None:
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return found if math.isfinite(found) and found >= 0 else None


def _retry_after(headers: Any) -> float | None:
    value = (headers or {}).get("retry-after") or (headers or {}).get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


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
