"""What a shared cache in front of the API (a CDN, a proxy) may keep, and for whom.

An answer is cached by URL; whatever else it depends on must be named in `Vary`, or the cache
hands one caller's answer to another. With CORS on, every answer depends on `Origin`: one
origin's answer carries its `Access-Control-Allow-Origin`, a refused or absent origin's carries
none, and a cache serving either to the other breaks or leaks (flask-cors names `Origin` only
when more than one origin is allowed). An answer that read who is calling (a bearer token or
the session cookie) is the caller's alone: it is never kept.
"""

from __future__ import annotations

from flask import Flask, Response, g

_READ_CALLER = "caching_read_caller"


def depends_on_caller() -> None:
    """Mark this request's answer as the caller's alone (read their token or cookie)."""
    setattr(g, _READ_CALLER, True)


def register(app: Flask, *, cors: bool) -> None:
    """Install the rules on every answer, errors included."""

    @app.after_request
    def _vary(response: Response) -> Response:
        if cors:
            response.vary.add("Origin")
        if g.get(_READ_CALLER) and not (
            response.cache_control.no_store or response.cache_control.private
        ):
            response.headers["Cache-Control"] = "private, no-store"
        return response
