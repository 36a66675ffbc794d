"""Composition root: `app` (the Flask API), the subscriber targets `access` and `emails`.

Importing this module reads no setting, builds nothing and loads no SDK (functions-framework
imports it to find a target; gunicorn to find `app`). On first use, `root()` reads `Settings`
and builds the `runtime.container.Container`, which builds each adapter once:

- the API: `create_app` -> each concept's `routes.py` -> its `service.py` (use cases) ->
  its `rules.py` and `store.py`
- access: `access/subscriber.py` (one cycle) -> `access/` (rules) -> `access/store.py`
- e-mail: `emails/subscriber.py` -> `emails/` (plan: which mail an event calls for;
  props; render) -> `adapters/mail/` (Resend, or the outbox) and `emails/store.py`
  (sent at most once per event and kind)
- the bus between them: `adapters/bus/` (in-process, or Pub/Sub)
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from runtime.lazy import Lazy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from cloudevents.http.event import CloudEvent
    from flask import Flask

    from config import Settings
    from runtime.container import Container


def _build_root() -> Container:
    from config import Settings
    from runtime import lifecycle, logs
    from runtime.container import Container

    settings = Settings()
    logs.configure(json_output=settings.json_logs, service=settings.service_context)
    container = Container(settings)
    lifecycle.on_shutdown(container.close)
    return container


_root = Lazy(_build_root)


def root() -> Container:
    """The process's collaborators, built from the environment's settings on first use."""
    return _root.get()


def create_app(settings: Settings | None = None, *, container: Container | None = None) -> Flask:
    """The API application; tests pass their own settings or container."""
    from runtime.api import build_api
    from runtime.cli import one_line_errors
    from runtime.container import Container

    if container is None:
        # `flask --app main ...` calls this to find the app: a settings problem ends the
        # command with one line per problem instead of a traceback.
        with one_line_errors():
            container = Container(settings) if settings is not None else root()
    app = build_api(container)
    _add_local_commands(app)
    return app


def _add_local_commands(app: Flask) -> None:
    """The local-only commands (`users`, `events send`), from dev/ where the checkout has it:
    the image leaves dev/ out, so a deployed service has none of them."""
    from importlib.util import find_spec

    if find_spec("dev") is None:
        return
    from dev.commands import register

    register(app)


class LazyApp:
    """A WSGI app that builds the API on its first request (as functions-framework's
    LazyWSGIApp does), so that importing `main` builds nothing."""

    def __init__(self, build: Callable[[], Flask]) -> None:
        self._app = Lazy(build)

    def load(self) -> Flask:
        """Build now (gunicorn does it as a worker starts, so no request waits for it)."""
        return self._app.get()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        return self._app.get()(environ, start_response)


app = LazyApp(create_app)


def access(cloud_event: CloudEvent) -> None:
    """Pub/Sub push target: grant or revoke access."""
    from adapters.bus.envelope import deliver

    deliver(cloud_event.data, root().pushes("access"), target="access")


def emails(cloud_event: CloudEvent) -> None:
    """Pub/Sub push target: send the e-mail the event calls for."""
    from adapters.bus.envelope import deliver

    deliver(cloud_event.data, root().pushes("emails"), target="emails")


def shutdown() -> None:
    """Flush pending publishes and close the pool, if they were built (SIGTERM, worker exit)."""
    from runtime import lifecycle

    lifecycle.shutdown()


# functions-framework's CLI has imported itself before it loads this file: registering the
# targets as CloudEvent functions then costs nothing, and `functions-framework --target=access`
# needs no `--signature-type`. Any other importer does not pay for loading it.
if "functions_framework" in sys.modules:
    import functions_framework

    for _target in (access, emails):
        functions_framework.cloud_event(_target)  # registers the name's signature type
