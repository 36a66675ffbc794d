"""The Flask API: blueprints, error mapping, logging and CLI commands on one app."""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS
from werkzeug.middleware.proxy_fix import ProxyFix

from accounts import leads_routes as leads
from accounts import leaving_routes as leaving
from accounts import routes as me
from accounts import signin_routes as auth
from api import caching, errors, health
from api.deps import Collaborators
from billing import completion_routes as checkout_completion
from billing import routes as payments
from catalogue import routes as products
from config import cors_origin_list
from credits import routes as usage
from emails import sample_routes as sample_emails
from events import routes as webhook
from github_access import routes as github
from plans import routes as plan_routes
from runtime import cli, limits, logs, openapi
from runtime.container import Container
from support import routes as admin
from teams import routes as teams
from topups import routes as top_up

# Every route's JSON is a few fields: a small default limit; the webhook opts into Stripe's size.
MAX_BODY_BYTES = 16 * 1024


def build_api(container: Container) -> Flask:
    """The API application over `container`'s collaborators."""
    app = Flask("main")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    # What the handlers read back as `api.deps.Collaborators` (mypy checks the fit here).
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
        plan_routes.bp,
        checkout_completion.bp,
        webhook.bp,
        products.bp,
        github.bp,
        me.bp,
        leaving.bp,
        usage.bp,
        top_up.bp,
        teams.bp,
        admin.bp,
        openapi.bp,
    ):
        app.register_blueprint(blueprint)
    origins = cors_origin_list(container.settings.cors_origins)
    caching.register(app, cors=bool(origins))
    if origins:
        # Exact origins, with credentials (the session cookies, or a bearer token): a browser
        # on one of them may read the answers; preflights are answered here, before any route.
        CORS(
            app,
            resources={r"/api/*": {"origins": origins}},
            supports_credentials=True,
            allow_headers=["Authorization", "Content-Type"],
            methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            max_age=600,
            # `Vary` is api/caching.py's (flask-cors names Origin only for several origins).
            vary_header=False,
        )
    if container.settings.test_email_enabled:
        app.register_blueprint(sample_emails.bp)
    limits.install(app, container.settings)
    cli.register(app)
    return app
