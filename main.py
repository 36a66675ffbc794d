"""Composition root: settings, adapters and the Flask API built once; the subscriber targets.

`main:app` is the API gunicorn serves; `access` and `emails` are the Functions Framework
CloudEvent targets (`functions-framework --target=access`). Importing this module builds no
client and opens no connection: adapters are created on first use (see `container.py`).
"""

from __future__ import annotations

import functions_framework
from cloudevents.http.event import CloudEvent
from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

import cli
import logs
from config import Settings
from container import Container
from handlers import (
    auth,
    errors,
    github,
    health,
    leads,
    payments,
    products,
    test_email,
    webhook,
)
from subscribers.envelope import deliver

MAX_BODY_BYTES = 1024 * 1024


def create_app(settings: Settings | None = None, *, container: Container | None = None) -> Flask:
    """The API application; tests pass their own settings or container."""
    if container is None:
        container = Container(settings or Settings())
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["container"] = container
    # Cloud Run terminates TLS in front of us: trust X-Forwarded-Proto for redirects and cookies.
    app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1)  # type: ignore[method-assign]
    logs.init_app(app, project_id=container.settings.google_cloud_project)
    errors.register(app)
    for blueprint in (
        health.bp,
        auth.bp,
        leads.bp,
        payments.bp,
        webhook.bp,
        products.bp,
        github.bp,
    ):
        app.register_blueprint(blueprint)
    if container.settings.test_email_enabled:
        app.register_blueprint(test_email.bp)
    cli.register(app)
    return app


settings = Settings()
logs.configure(json_output=settings.is_production)
container = Container(settings)
app = create_app(container=container)


def shutdown() -> None:
    """Flush pending publishes and close the pool (gunicorn worker exit, SIGTERM)."""
    container.close()


@functions_framework.cloud_event
def access(cloud_event: CloudEvent) -> None:
    """Pub/Sub push target: grant or revoke access."""
    deliver(cloud_event.data, container.access_subscriber, target="access")


@functions_framework.cloud_event
def emails(cloud_event: CloudEvent) -> None:
    """Pub/Sub push target: send the e-mail the event calls for."""
    deliver(cloud_event.data, container.email_subscriber, target="emails")
