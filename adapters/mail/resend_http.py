"""The HTTP client the Resend SDK sends through: connections kept alive, little per request.

The SDK's own client (`resend.RequestsClient`) calls `requests.request`, which opens a new
connection, and so a new TLS session, for every e-mail: a handshake's CPU and two or three
round trips to Resend on each send. This one keeps a pool of connections (urllib3, which
requests itself sends through) and skips requests' per-request work (the environment's proxy
settings scanned, cookies, hooks), which was a third of an e-mail's CPU. Imported on the first
send, as the SDK is.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import certifi
import urllib3
from resend.http_client import HTTPClient


class KeptAliveClient(HTTPClient):
    """A urllib3 pool keeping up to `connections` connections to `url`'s host open. A send on
    a connection Resend has closed meanwhile fails like any network error: the mailer retries
    it with the same idempotency key. The environment's proxy and CA bundle for `url` (the
    variables requests reads) are read once, here."""

    def __init__(self, timeout: float, *, connections: int, url: str) -> None:
        self._timeout = urllib3.Timeout(total=timeout)
        proxy, ca_bundle = _environment(url)
        options: dict[str, Any] = {"maxsize": connections, "ca_certs": ca_bundle}
        self._pool: urllib3.PoolManager = (
            urllib3.ProxyManager(proxy, **options) if proxy else urllib3.PoolManager(**options)
        )

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        json: dict[str, object] | list[object] | None = None,
        files: dict[str, Any] | None = None,
        data: dict[str, str] | None = None,
    ) -> tuple[bytes, int, Mapping[str, str]]:
        if files is not None or data is not None:
            # The mailer sends JSON only; attachments and forms are not part of this client.
            raise RuntimeError("KeptAliveClient sends JSON bodies only")
        body = None if json is None else jsonlib.dumps(json).encode()
        sent = {**headers, "Content-Type": "application/json"} if body is not None else headers
        try:
            resp = self._pool.request(
                method, url, body=body, headers=dict(sent), timeout=self._timeout, retries=False
            )
        except urllib3.exceptions.HTTPError as exc:
            # What the SDK's client raises: the SDK turns it into a ResendError, retried here.
            raise RuntimeError(f"Request failed: {exc}") from exc
        return resp.data, resp.status, resp.headers

    def close(self) -> None:
        self._pool.clear()


def _environment(url: str) -> tuple[str | None, str]:
    """The proxy (HTTPS_PROXY, NO_PROXY) and CA bundle (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE,
    else certifi's) that requests, the SDK's own client, would take from the environment
    for `url`: asked of requests once, so that sends through this pool trust and route as
    the SDK's did."""
    import requests

    with requests.Session() as session:
        found = session.merge_environment_settings(url, {}, None, None, None)
    verify = found["verify"]
    return found["proxies"].get(urlsplit(url).scheme), (
        verify if isinstance(verify, str) else certifi.where()
    )
