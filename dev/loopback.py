"""A WSGI app served on loopback on a thread, for the duration of a block: the local stand-ins
(Stripe, Supabase Auth, Google's metadata and push, Cloud Run's front end) each run this way."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from werkzeug.serving import make_server


@contextlib.contextmanager
def serving(app: Callable[..., Any], *, name: str, port: int = 0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (`port`, or a free one) until the block ends; yields its URL."""
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
