"""Mail through Resend's API with the official SDK."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from adapters.mail.message import MailError, OutgoingEmail, checked_key

if TYPE_CHECKING:
    import resend

log = logging.getLogger(__name__)

DEFAULT_RESEND_API_URL = "https://api.resend.com"

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

        key = checked_key(idempotency_key)
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
