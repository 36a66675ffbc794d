"""A local stand-in for Cloud Run's front end of a private service (no unauthenticated access).

What it copies from Cloud Run, because the subscriber targets depend on it:
- The IAM invoker check: the bearer token (`X-Serverless-Authorization` when present, else
  `Authorization`, as Cloud Run reads them) must be a Google-signed ID token (here: signed by the
  local key acting as Google's, dev/local_google.py) whose `aud` is the service's URL and whose
  `email` is an account allowed to invoke. No token, or an account that may not invoke: 403;
  a token that does not verify (signature, audience, expiry): 401.
- The checked token is forwarded with its signature replaced by `SIGNATURE_REMOVED_BY_GOOGLE`
  (Cloud Run's troubleshooting page, "signature removed"), so the container never sees a
  signature it could check.
- The request timeout (`gcloud run deploy --timeout`, 300 s by default): a container that has not
  answered by then gets its request cut and the caller a 504.
- Shutdown, when the front manages the container's process: SIGTERM, 10 s of grace, then SIGKILL
  (Cloud Run's container runtime contract).
Cloud Run's startup and liveness probes do not pass through the front: they dial the container.
"""

from __future__ import annotations

import contextlib
import http.client
import subprocess
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.auth import exceptions as google_exceptions
from google.auth import jwt
from werkzeug.wrappers import Request, Response

from dev import loopback
from dev.local_google import LocalGoogle, remove_signature
from dev.pubsub_emulator import stop_group

DEFAULT_TIMEOUT_SECONDS = 300.0
SHUTDOWN_GRACE_SECONDS = 10.0
# Hop-by-hop headers (RFC 9110, 7.6.1) and what the front sets itself are not passed on.
_NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "host"}
    | {"proxy-authorization", "proxy-authenticate", "content-length"}
)


class Refused(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


@dataclass
class CloudRunFront:
    """A WSGI app in front of one container at `target_url`; its own URL is the audience."""

    target_url: str
    google: LocalGoogle
    invokers: frozenset[str]
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    url: str = ""
    # Other URLs the service is known by (its run.app URL in a test of production settings).
    aliases: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    grace: float = SHUTDOWN_GRACE_SECONDS

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            headers = self._checked_headers(request)
        except Refused as refused:
            response = Response(str(refused), status=refused.status, content_type="text/html")
        else:
            response = self._forward(request, headers)
        return response(environ, start_response)

    def _checked_headers(self, request: Request) -> dict[str, str]:
        """The request's headers with the invoker's token verified and its signature removed."""
        header = (
            "X-Serverless-Authorization"
            if "X-Serverless-Authorization" in request.headers
            else "Authorization"
        )
        scheme, _, token = request.headers.get(header, "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(403, "Error: Forbidden. Your client does not have permission.")
        token = token.strip()
        try:
            claims = jwt.decode(  # type: ignore[no-untyped-call]
                token, certs=self.google.certs(), audience=self._audiences()
            )
        except (ValueError, google_exceptions.GoogleAuthError) as exc:
            raise Refused(401, f"Error: Unauthorized. {exc}") from exc
        if claims.get("email") not in self.invokers:
            raise Refused(403, "Error: Forbidden. The caller may not invoke this service.")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        headers[header] = f"Bearer {remove_signature(token)}"
        client = request.remote_addr or "127.0.0.1"
        previous = request.headers.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = f"{previous}, {client}" if previous else client
        return headers

    def _audiences(self) -> list[str]:
        # The service's URL, with or without the trailing slash Pub/Sub's default audience has.
        return [u + end for u in (self.url, *self.aliases) for end in ("", "/")]

    def _forward(self, request: Request, headers: dict[str, str]) -> Response:
        target = urllib.parse.urlsplit(self.target_url)
        connection = http.client.HTTPConnection(
            target.hostname or "127.0.0.1", target.port, timeout=self.timeout
        )
        path = request.full_path if request.query_string else request.path
        try:
            connection.request(request.method, path, body=request.get_data(), headers=headers)
            answer = connection.getresponse()
            body = answer.read()
        except TimeoutError:
            return Response("upstream request timeout", status=504)
        except (OSError, http.client.HTTPException) as exc:
            return Response(f"Service Unavailable: {exc}", status=503)
        finally:
            connection.close()
        passed = [(k, v) for k, v in answer.getheaders() if k.lower() not in _NOT_FORWARDED]
        return Response(body, status=answer.status, headers=passed)

    def stop_container(self) -> None:
        """Cloud Run's shutdown of an instance: SIGTERM, 10 s of grace, then SIGKILL."""
        if self.process is not None:
            stop_group(self.process, timeout=self.grace)


@contextlib.contextmanager
def running(
    target_url: str,
    google: LocalGoogle,
    *,
    invokers: frozenset[str],
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    port: int = 0,
    aliases: tuple[str, ...] = (),
    process: subprocess.Popen[bytes] | None = None,
) -> Iterator[CloudRunFront]:
    """A front on loopback (`port`, or a free one) for the block; then the container stops."""
    front = CloudRunFront(target_url, google, invokers, timeout, aliases=aliases, process=process)
    try:
        with loopback.serving(front, name="cloudrun-front", port=port) as front.url:
            yield front
    finally:
        front.stop_container()
