"""A record of what the local Stripe says: every answer of the Stripe stand-in and every event
it or the samples make, appended as one JSON line each to the file STRIPE_RECORD names (unset:
nothing is written). The suite sets it, in its own process and the `make run` and `make demo`
it starts, and holds every line to Stripe's published types (tests/stripe_types.py)."""

from __future__ import annotations

import json
import os
from typing import Any

STRIPE_RECORD = "STRIPE_STAND_IN_RECORD"


def record(kind: str, body: Any, *, what: str, api_version: str | None = None) -> None:
    """`body` (an answer or an event: `kind`), said of `what` (a request's method and path, or
    where the event came from), at `api_version` where one was asked for."""
    target = os.environ.get(STRIPE_RECORD)
    if not target:
        return
    line = json.dumps({"kind": kind, "what": what, "api_version": api_version, "body": body})
    # One write of a whole line to a file opened for appending: lines of several processes
    # and threads do not interleave.
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
