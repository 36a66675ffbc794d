"""The subscriber targets (`access`, `emails`) as a WSGI app for gunicorn, like the API.

`functions-framework` builds this same Flask app, then serves it with gunicorn options it fixes
itself (30 s graceful timeout, no `worker_exit` hook, plain-text logs). Handing the app to our
gunicorn instead lets both paths share `gunicorn.conf.py`: drained within Cloud Run's 10 s grace,
`main.shutdown()` on worker exit, JSON logs.
"""

from __future__ import annotations

import os
from pathlib import Path

import flask
import functions_framework

import logs

TARGETS = ("access", "emails")
SOURCE = Path(__file__).with_name("main.py")


def create_app(target: str) -> flask.Flask:
    """The Functions Framework app for one CloudEvent target of `main.py`."""
    if target not in TARGETS:
        raise ValueError(f"FUNCTION_TARGET must be one of {', '.join(TARGETS)}, not {target!r}")
    app = functions_framework.create_app(target, str(SOURCE), "cloudevent")  # type: ignore[no-untyped-call]
    if not isinstance(app, flask.Flask):
        raise TypeError(f"{target} must be a synchronous CloudEvent function")
    logs.init_app(app, project_id=os.environ.get("GOOGLE_CLOUD_PROJECT", "local-project"))
    return app


app = create_app(os.environ.get("FUNCTION_TARGET", ""))
