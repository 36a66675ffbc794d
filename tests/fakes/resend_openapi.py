"""Resend's published OpenAPI document (tests/fixtures/resend/) as the judge of what crosses
the Resend boundary: each request the product sends and each answer the fake gives is checked
against the operation the document declares for it (parameters, security, body schemas)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from werkzeug.wrappers import Request, Response

DOCUMENT = Path(__file__).resolve().parent.parent / "fixtures" / "resend" / "openapi.yaml"

# openapi-core's lazily resolved document is not known to be safe across threads, and the
# fakes answer on several: one check at a time.
_LOCK = threading.Lock()


@cache
def resend_openapi(document: Path = DOCUMENT) -> OpenAPI:
    """The document, itself checked as OpenAPI 3.1 when loaded."""
    return OpenAPI.from_file_path(str(document))


class _AsServedByResend(WerkzeugOpenAPIRequest):
    """A request to the fake, seen at the address the document's `servers` names: the fake
    serves on loopback, Resend at its own host."""

    def __init__(self, request: Request, host_url: str) -> None:
        super().__init__(request)
        self._host_url = host_url

    @property
    def host_url(self) -> str:
        return self._host_url


def nonconformities(
    request: Request, response: Response, *, document: Path = DOCUMENT
) -> list[str]:
    """What in this exchange the document refuses, one line each (empty: it conforms). An
    answer whose status the document does not describe (Resend's errors) is not judged; the
    request always is."""
    openapi = resend_openapi(document)
    server = str((openapi.spec / "servers" / 0)["url"])
    seen = _AsServedByResend(request, server + "/")
    where = f"{request.method} {request.path}"
    with _LOCK:
        found = [f"{where} request: {e}" for e in _messages(openapi.iter_request_errors(seen))]
        if not found and response.status_code < 300:
            answered = WerkzeugOpenAPIResponse(response)
            found += [
                f"{where} answer {response.status_code}: {e}"
                for e in _messages(openapi.iter_response_errors(seen, answered))
            ]
    return found


def _messages(errors: Iterator[Exception]) -> Iterator[str]:
    for error in errors:
        schema_errors: Any = getattr(error.__cause__, "schema_errors", None)
        if not schema_errors:
            yield str(error)
            continue
        name, location = getattr(error, "name", None), getattr(error, "location", None)
        part = f"{location} parameter {name}" if name and location else "body"
        for each in schema_errors:
            at = "".join(f"[{p!r}]" for p in each.absolute_path)
            yield f"{part}{at}: {each.message}"
