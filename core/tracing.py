"""The trace an event travels under, from the webhook's request to every subscriber's lines.

A request brings its trace in `traceparent` (W3C Trace Context) or Google's
`X-Cloud-Trace-Context`; publishing copies it into the message's `traceparent` attribute, and
whoever handles the message logs under the same trace id with a span of its own. The trace of
the work at hand is held in a context variable, so that it follows a request or a delivery
without being passed through every call.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# The message attribute the trace travels in (the header's own name).
ATTRIBUTE = "traceparent"

_TRACEPARENT = re.compile(
    r"^(?P<version>[0-9a-f]{2})-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})-(?P<flags>[0-9a-f]{2})"
)
# The span is a 64-bit number in decimal: at most 20 digits (a longer one is no span, and its
# int() would raise past Python's digit limit).
_CLOUD_TRACE = re.compile(
    r"^(?P<trace>[0-9a-fA-F]{32})(?:/(?P<span>[0-9]{1,20}))?(?:;o=(?P<o>[01]))?$"
)
_SPAN_LIMIT = 2**64


@dataclass(frozen=True)
class Trace:
    """A trace id (32 hex digits), the current span (16 hex digits, or ""), sampled or not."""

    trace_id: str
    span_id: str
    sampled: bool

    def traceparent(self) -> str:
        """This trace as a W3C `traceparent` value (a span of zeros is not allowed: a new one)."""
        span = self.span_id or secrets.token_hex(8)
        return f"00-{self.trace_id}-{span}-{'01' if self.sampled else '00'}"

    def child(self) -> Trace:
        """The same trace, in a span of its own."""
        return Trace(self.trace_id, secrets.token_hex(8), self.sampled)


def from_traceparent(value: str) -> Trace | None:
    match = _TRACEPARENT.match(value.strip())
    if not match or match["version"] == "ff" or set(match["trace"]) == {"0"}:
        return None
    span = "" if set(match["span"]) == {"0"} else match["span"]
    return Trace(match["trace"], span, bool(int(match["flags"], 16) & 1))


def from_cloud_trace(value: str) -> Trace | None:
    match = _CLOUD_TRACE.match(value.strip())
    if not match or set(match["trace"]) == {"0"}:
        return None
    # Cloud Logging wants the span as 16 hex digits; this header carries it in decimal.
    number = int(match["span"] or 0)
    span = f"{number:016x}" if 0 < number < _SPAN_LIMIT else ""
    return Trace(match["trace"].lower(), span, match["o"] == "1")


def from_headers(*, traceparent: str, cloud_trace: str) -> Trace | None:
    """The trace a request names: `traceparent` first, else `X-Cloud-Trace-Context`."""
    return from_traceparent(traceparent) or from_cloud_trace(cloud_trace)


_current: ContextVar[Trace | None] = ContextVar("trace", default=None)


def current() -> Trace | None:
    """The trace of the work at hand, if any."""
    return _current.get()


@contextmanager
def active(trace: Trace | None) -> Iterator[None]:
    """Work under `trace` for the duration of the block."""
    token = _current.set(trace)
    try:
        yield
    finally:
        _current.reset(token)


def begin(trace: Trace | None) -> object:
    """Work under `trace` until `end` is called with what this returns (request hooks)."""
    return _current.set(trace)


def end(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
