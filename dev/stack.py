"""The local stack `make run` and `make demo` share: database, bus, subscriber targets.

Without DATABASE_URL an embedded Postgres runs under `.data/postgres`. With EVENT_BUS=pubsub
the whole pipeline runs as in production: the Pub/Sub emulator (started here unless
PUBSUB_EMULATOR_HOST names one), and the `access` and `emails` targets as processes of their
own (`bin/serve`), each behind a stand-in of Cloud Run's front (dev/cloudrun_front.py), fed by
push subscriptions carrying a push token signed by a local key acting as Google's
(dev/local_google.py), so the targets check it as in production. Each step that makes a person
wait says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import BaseWSGIServer, make_server

from adapters.bus.topology import PushPolicy, ensure_topology
from adapters.db import migrations, profiles
from catalogue import service as catalogue
from config import Settings
from config.site import cors_origin_list
from dev import (
    auth_stand_in,
    cloudrun_front,
    local_google,
    local_postgres,
    pipeline_view,
    pubsub_emulator,
    stripe_stand_in,
    web,
)
from dev.local_google import PUSH_ACCOUNT, LocalGoogle
from dev.processes import start_target
from dev.pubsub_emulator import free_port
from main import create_app
from runtime import lifecycle
from runtime.consumers import MESSAGE_FILTERS
from runtime.container import Container
from runtime.targets import TARGETS

log = logging.getLogger("devserver")
# Cloud Run's request timeout for the subscriber services, as cloudbuild.yaml deploys them.
SUBSCRIBER_TIMEOUT_SECONDS = 60.0


@contextlib.contextmanager
def step(doing: str) -> Iterator[None]:
    """Say what is starting, then how long it took."""
    print(f"{doing}...", flush=True)
    started = time.monotonic()
    yield
    print(f"  done in {time.monotonic() - started:.1f} s", flush=True)


def local_settings(settings: Settings, stack: contextlib.ExitStack) -> Settings:
    """`settings` with a database and, for the Pub/Sub bus, an emulator started if missing."""
    overrides: dict[str, object] = {}
    if settings.database_url is None:
        pgdata = settings.data_dir.resolve() / "postgres"
        first = not (pgdata / "PG_VERSION").exists()
        with step(f"Starting the embedded Postgres in {pgdata}" + (" (first run: initdb)" * first)):
            server = local_postgres.start(pgdata)
        stack.callback(server.cleanup)
        overrides["database_url"] = local_postgres.url(server)
    if settings.event_bus == "pubsub" and not settings.pubsub_emulator_host:
        with step("Starting the Pub/Sub emulator (a JVM: a few seconds)"):
            emulator = stack.enter_context(
                pubsub_emulator.running(project=settings.google_cloud_project)
            )
        overrides["pubsub_emulator_host"] = emulator.host
        print(f"Pub/Sub emulator on {emulator.host} (stopped with the server)", flush=True)
    if not overrides:
        return settings
    return with_overrides(settings, overrides)


def with_stripe_stand_in(
    settings: Settings, stack: contextlib.ExitStack
) -> tuple[Settings, stripe_stand_in.StripeStandIn | None]:
    """Without STRIPE_SECRET_KEY outside production, the settings of a started Stripe stand-in."""
    if settings.stripe_secret_key is not None or settings.is_production:
        return settings, None
    # What it holds (the catalogue, with the products a founder made there; customers,
    # subscriptions) is kept beside the database, and goes with it at `make reset`.
    state = settings.data_dir.resolve() / "stripe.json"
    stand_in = stack.enter_context(stripe_stand_in.running(settings.product_name, state=state))
    print(
        f"Stripe: a local stand-in on {stand_in.url}, keeping its objects in {state}"
        " (no STRIPE_SECRET_KEY; set one for Stripe's test mode)",
        flush=True,
    )
    if settings.retention_coupon:
        # The coupon RETENTION_COUPON names, as a founder makes it in Stripe's dashboard, so
        # the cancellation's offer can be tried locally.
        stand_in.hold_coupon(settings.retention_coupon, percent_off=20, duration_in_months=3)
    overrides = {"stripe_secret_key": stripe_stand_in.API_KEY, "stripe_api_base": stand_in.url}
    return with_overrides(settings, overrides), stand_in


def with_auth_stand_in(settings: Settings) -> tuple[Settings, auth_stand_in.AuthStandIn | None]:
    """Without SUPABASE_URL outside production, the settings of the Supabase Auth stand-in that
    `api_server` serves beside the API, on its port, under /auth/v1 (SUPABASE_URL is then the
    API's own address, so a browser page reaches both at one fixed place)."""
    if settings.supabase_url is not None or settings.is_production:
        return settings, None
    api = f"http://localhost:{settings.port}"
    site = str(settings.site_url) if settings.site_url else api
    site_origin = settings.site_origin or api
    stand_in = auth_stand_in.AuthStandIn(
        site_url=site,
        # Supabase's "Redirect URLs": the API's sign-in callback, beside the site itself.
        allow_list=(f"{api}/api/auth/callback**",),
        origins=frozenset({site_origin, api, *cors_origin_list(settings.cors_origins)}),
        publishable_keys=frozenset({auth_stand_in.PUBLISHABLE_KEY}),
        secret_keys=frozenset({auth_stand_in.SECRET_KEY}),
        jwt_secret=settings.jwt_secret,
        outbox=settings.email_outbox_dir.resolve(),
        sender=settings.email_from_noreply,
        # Its signing keys and sessions, beside the database (gone at `make reset`).
        state=settings.data_dir.resolve() / "auth.json",
    )
    stand_in.url = api
    print(
        f"Supabase Auth: a local stand-in on {api}/auth/v1, magic links to"
        f" {settings.email_outbox_dir.resolve()} (no SUPABASE_URL; set one for a project)",
        flush=True,
    )
    overrides = {
        "supabase_url": api,
        "supabase_publishable_key": auth_stand_in.PUBLISHABLE_KEY,
        "supabase_secret_key": auth_stand_in.SECRET_KEY,
        # `flask users token` keeps signing HS256 tokens, which the API and the stand-in take
        # beside the stand-in's ES256 ones, as a project moving to signing keys does.
        "supabase_jwt_secret": settings.jwt_secret,
    }
    return with_overrides(settings, overrides), stand_in


def pay_through(stand_in: stripe_stand_in.StripeStandIn, container: Container, api: str) -> None:
    """The stand-in's checkout page pays through the webhook of the API at `api`, signing as
    Stripe does with this stack's secret."""
    stand_in.webhook = stripe_stand_in.Webhook(
        url=api.rstrip("/") + "/api/webhook/payments",
        secret=container.settings.webhook_secret,
        email_of=lambda customer: customer_email(container, customer),
    )


def customer_email(container: Container, customer_id: str) -> str | None:
    """The e-mail of the user a Stripe customer belongs to, standing in for Stripe's record."""
    found = profiles.by_customer(container.db, customer_id)
    return found.email if found else None


def prepare(container: Container) -> None:
    """Database migrated; in development, the catalogue synced from Stripe (the stand-in's demo
    products, or your test mode's with STRIPE_SECRET_KEY set), as `products sync` does."""
    settings = container.settings
    applied = migrations.apply_all(
        container.database_url(), allow_auth_stand_in=not settings.is_production
    )
    log.info("migrations applied now: %s", applied or "none needed")
    if settings.app_env == "development":
        try:
            needs = settings.products_need_tax_code
            synced = catalogue.sync(container.db, container.stripe, needs_tax_code=needs)
        except Exception as exc:  # Stripe's test mode unreachable: serve what the table has
            log.warning("catalogue not synced (%s): `flask --app main products sync` later", exc)
        else:
            log.info("catalogue synced from Stripe: %d price(s) on sale", synced.sold)


def start_subscribers(settings: Settings, stack: contextlib.ExitStack) -> None:
    """Each subscriber target in a process of its own behind a stand-in of Cloud Run's front,
    fed by a push subscription whose OIDC token local Google attaches (the emulator cannot)."""
    google = stack.enter_context(local_google.running())
    endpoints, processes = {}, []
    with step(f"Starting the subscriber targets {', '.join(TARGETS)} (bin/serve)"):
        for name in TARGETS:
            endpoints[name], process = start_private_service(name, settings, google, stack)
            processes.append(process)
    # Unwound first: every target is told to stop at once and drains beside the others, as
    # Cloud Run stops instances; each front then waits for its own. One after another, their
    # drains added up past the time a Ctrl-C (or a test) gives the whole server.
    stack.callback(_terminate, processes)
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=settings.google_cloud_project,
        topic=settings.pubsub_topic,
        push_endpoints=endpoints,
        # Production's policy, except the first retry comes after 1 s rather than 10 s.
        policy=PushPolicy(min_backoff=1.0),
        emulator_host=settings.pubsub_emulator_host,
    )


def _terminate(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each target's process group (each leads its own, dev/processes.py)."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)


def start_private_service(
    name: str, settings: Settings, google: LocalGoogle, stack: contextlib.ExitStack
) -> tuple[str, subprocess.Popen[bytes]]:
    """`name` as Cloud Run serves a private service, checking push tokens as in production;
    returns the push endpoint for the emulator and the target's process."""
    port = free_port()
    service_url = f"http://127.0.0.1:{port}"  # the front's, so the audience of the push token
    push = {
        "push_audience": service_url,
        "push_service_account": PUSH_ACCOUNT,
        "push_certs_url": google.certs_url,
        # Cloud Run names the service and revision in the environment: JSON logs, as there.
        "k_service": name,
        "k_revision": f"{name}-00001-local",
    }
    log_path = settings.data_dir / f"{name}.log"
    target = start_target(name, with_overrides(settings, push), log=log_path)
    stack.callback(target.stop)
    front = stack.enter_context(
        cloudrun_front.running(
            target.url,
            google,
            invokers=frozenset({PUSH_ACCOUNT}),
            timeout=SUBSCRIBER_TIMEOUT_SECONDS,
            port=port,
            process=target.process,
        )
    )
    print(f"  {name} target on {target.url} behind Cloud Run's front on {front.url}", flush=True)
    print(f"    (log: {target.log})", flush=True)
    return google.push_endpoint(name, to=front.url + "/", audience=service_url), target.process


def start(
    settings: Settings,
    stack: contextlib.ExitStack,
    *,
    auth: auth_stand_in.AuthStandIn | None = None,
) -> Container:
    """Everything the API needs, started and prepared; stopped when `stack` closes. `auth`, the
    Supabase Auth stand-in, keeps its users in this stack's database."""
    settings, stand_in = with_stripe_stand_in(local_settings(settings, stack), stack)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    container = Container(settings)
    stack.callback(container.close)
    stack.callback(lifecycle.shutdown)
    prepare(container)
    if auth is not None:
        auth.database_url = container.database_url()
    if settings.event_bus == "pubsub":
        start_subscribers(settings, stack)
    if stand_in is not None:
        # The API `make run` serves on PORT (`make demo` pays through the API, not the page).
        host = "127.0.0.1" if settings.dev_host in ("0.0.0.0", "::", "") else settings.dev_host  # noqa: S104
        pay_through(stand_in, container, f"http://{host}:{settings.port}")
    return container


def api_server(
    container: Container,
    *,
    host: str,
    port: int,
    auth: auth_stand_in.AuthStandIn | None = None,
) -> BaseWSGIServer:
    """The API over HTTP, threaded as `make run` serves it (not started yet), with the local
    view of the pipeline at /_dev/pipeline, given one, the Supabase Auth stand-in at
    /auth/v1, and the frontend (web/) on every other path."""
    mounts: dict[str, Any] = {pipeline_view.PATH: pipeline_view.view_app(container)}
    if auth is not None:
        mounts["/auth/v1"] = auth
    api = DispatcherMiddleware(create_app(container=container), mounts)
    return make_server(
        host, port, web.web_app(api, web.config_js(container.settings)), threaded=True
    )


def serve_in_background(server: BaseWSGIServer, stack: contextlib.ExitStack) -> str:
    """Serve on a thread until `stack` closes; returns the base URL."""
    thread = threading.Thread(target=server.serve_forever, name="api", daemon=True)
    thread.start()
    stack.callback(thread.join, 5)
    stack.callback(server.shutdown)
    return f"http://127.0.0.1:{server.server_port}"


def with_overrides(settings: Settings, overrides: Mapping[str, object]) -> Settings:
    """A copy of `settings` with `overrides`, validated again."""
    fields = {name: getattr(settings, name) for name in Settings.model_fields}
    return Settings(**{**fields, **overrides})
