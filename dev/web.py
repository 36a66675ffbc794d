"""`make run`'s frontend: web/ served beside the API on the same origin (SITE_URL's local
default, `http://localhost:$PORT`), so every link an e-mail carries and every redirect the API
answers resolves locally.

The API stays the API: /api/..., /healthz, /_dev/... (and /auth/v1/..., the Supabase Auth
stand-in) go to it. Every other GET is a file of web/ (a directory's index.html), as a static
host serves the same files in production (docs/deploy/); a path web/ lacks answers
web/404.html with a 404. `/config.js` is written
here from the settings (where Supabase Auth is, its publishable key), where a deployed host
serves the file a founder wrote (web/config.js).
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from werkzeug.wrappers import Request, Response

from config import Settings

ROOT = Path(__file__).resolve().parents[1] / "web"
# What the API (and, locally, the Supabase Auth stand-in) serves, whatever web/ holds.
API_PREFIXES = ("/api/", "/healthz", "/_dev/", "/auth/v1/")
CONFIG_PATH = "/config.js"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def config_js(settings: Settings, *, api_base: str = "") -> str:
    """web/config.js's shape, filled from this stack's settings: the API at `api_base` ("" for
    the page's own origin)."""
    key = settings.supabase_publishable_key
    config = {
        "apiBase": api_base,
        "supabaseUrl": str(settings.supabase_url).rstrip("/") if settings.supabase_url else None,
        "supabaseKey": key.get_secret_value() if key else None,
        "cookieDomain": settings.cookie_domain,
        "brand": settings.product_name,
        "currency": "usd",
        "supportEmail": settings.support_email,
    }
    return (
        "// Written by the development server from its settings (dev/web.py).\n"
        f"export const CONFIG = {json.dumps(config, indent=2)};\n"
    )


def file_for(root: Path, path: str) -> Path | None:
    """The file of web/ a URL path names (a directory: its index.html); None when there is
    none or the path would leave web/."""
    relative = path.lstrip("/")
    if "\\" in relative or any(part in ("..", ".") for part in relative.split("/")):
        return None
    found = (root / relative).resolve()
    if not found.is_relative_to(root.resolve()):
        return None
    if found.is_dir():
        found = found / "index.html"
    return found if found.is_file() else None


def web_app(api: WSGIApp, config_source: str, *, root: Path = ROOT) -> WSGIApp:
    """The API for its paths; web/'s files for the rest, with `config_source` as /config.js."""
    config = config_source.encode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path.startswith(API_PREFIXES) or environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return api(environ, start_response)
        response = _static(Request(environ), path, root, config)
        return response(environ, start_response)

    return app


def _static(request: Request, path: str, root: Path, config: bytes) -> Response:
    if path == CONFIG_PATH:
        return _answer(config, "text/javascript", 200)
    found = file_for(root, path)
    if found is None:
        return _answer((root / "404.html").read_bytes(), "text/html", 404)
    kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
    if found.suffix == ".js":
        kind = "text/javascript"  # a module script must be served as JavaScript
    return _answer(found.read_bytes(), kind, 200)


def _answer(body: bytes, kind: str, status: int) -> Response:
    charset = "; charset=utf-8" if kind.startswith("text/") or kind.endswith("json") else ""
    response = Response(body, status=status, content_type=kind + charset)
    # Local files change while a founder edits them: never served stale.
    response.headers["Cache-Control"] = "no-cache"
    return response
