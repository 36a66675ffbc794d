"""The Flask API: blueprints, error mapping, logging and CLI commands on one app."""

from __future__ import annotations

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from handlers import (
    auth,
    errors,
    github,
    health,
    leads,
    openapi,
    payments,
    products,
    sample_emails,
    webhook,
)
from handlers.deps import Collaborators
from runtime import cli, limits, logs
from runtime.container import Container

# Every route's JSON is a few fields: a small default limit; the webhook opts into Stripe's size.
MAX_BODY_BYTES = 16 * 1024


def build_api(container: Container) -> Flask:
    """The API application over `container`'s collaborators."""
    app = Flask("main")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    # What the handlers read back as `handlers.deps.Collaborators` (mypy checks the fit here).
    collaborators: Collaborators = container
    app.extensions["container"] = collaborators
    # Cloud Run terminates TLS in front of us and appends the client's address to
    # X-Forwarded-For: trust that many hops from the right, so a client's own header changes
    # nothing (the rate limits key on the address).
    app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
        app.wsgi_app, x_for=container.settings.trusted_proxy_hops, x_proto=1
    )
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
        openapi.bp,
    ):
        app.register_blueprint(blueprint)
    if container.settings.test_email_enabled:
        app.register_blueprint(sample_emails.bp)
    limits.install(app, container.settings)
    cli.register(app)
    return app
