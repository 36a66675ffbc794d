"""`make run`: the API on $PORT with everything it needs locally (dev/stack.py), in the foreground.

Once it listens it prints where things are (database, outbox, webhook secret) and the next
commands to try, and writes them to `.data/run.env` so another terminal can
`source .data/run.env` and use the Flask CLI against this very stack.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
from pathlib import Path

from config import DEV_WEBHOOK_SECRET, Settings
from dev import auth_stand_in, stripe_stand_in
from dev import stack as local_stack
from runtime import logs

EXAMPLE_USER = "ada@example.com"


def stop_once(signum: int, frame: object) -> None:
    """First Ctrl-C or SIGTERM stops the server; later ones must not cut the clean-up short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def cli_environment(settings: Settings) -> dict[str, str]:
    """What the Flask CLI in another terminal needs to reach this stack."""
    env = {"PORT": str(settings.port)}
    if settings.database_url is not None:
        env["DATABASE_URL"] = settings.database_url.get_secret_value()
    key = settings.stripe_secret_key
    if settings.stripe_api_base and key and key.get_secret_value() == stripe_stand_in.API_KEY:
        # The stand-in's (no secret): `products sync` and the catalogue events read from it.
        env["STRIPE_SECRET_KEY"] = stripe_stand_in.API_KEY
        env["STRIPE_API_BASE"] = str(settings.stripe_api_base)
    if settings.supabase_publishable_key and (
        settings.supabase_publishable_key.get_secret_value() == auth_stand_in.PUBLISHABLE_KEY
    ):
        # The Auth stand-in's (public values): `users token` signs for it, as the API checks.
        env["SUPABASE_URL"] = str(settings.supabase_url).rstrip("/")
        env["SUPABASE_PUBLISHABLE_KEY"] = auth_stand_in.PUBLISHABLE_KEY
        env["SUPABASE_SECRET_KEY"] = auth_stand_in.SECRET_KEY
        env["SUPABASE_JWT_SECRET"] = settings.jwt_secret or ""
    if settings.event_bus == "pubsub":
        env["EVENT_BUS"] = "pubsub"
        env["PUBSUB_EMULATOR_HOST"] = settings.pubsub_emulator_host or ""
    return env


def write_run_env(settings: Settings, stack: contextlib.ExitStack) -> Path:
    """`.data/run.env`: `export` lines for the CLI, removed when the server stops."""
    path = settings.data_dir / "run.env"
    lines = [f"export {k}={shlex.quote(v)}" for k, v in cli_environment(settings).items()]
    path.write_text(
        "# Written by `make run` while it runs; `source` it in another terminal.\n"
        + "\n".join(lines)
        + "\n"
    )
    stack.callback(path.unlink, missing_ok=True)
    return path


def banner(settings: Settings, run_env: Path) -> str:
    """Where things are and what to try next."""
    secret = settings.webhook_secret
    whose = (
        "the public development value" if secret == DEV_WEBHOOK_SECRET else "STRIPE_WEBHOOK_SECRET"
    )
    database = settings.database_url.get_secret_value() if settings.database_url else "-"
    flask = "uv run flask --app main"
    base = f"http://localhost:{settings.port}"
    return "\n".join(
        [
            f"API        {base} (Ctrl-C to stop)",
            f"Database   {database}",
            f"Outbox     {settings.email_outbox_dir.resolve()} (each e-mail a .eml file)",
            f"Webhook    {base}/api/webhook/payments, secret {secret} ({whose})",
            f"Pages      {base}/ (the reference frontend, web/: pricing, sign-in, dashboard)",
            f"Pipeline   {base}/_dev/pipeline (events, outcomes, e-mails, dead letters)",
            *auth_lines(settings),
            "",
            "Next, in another terminal:",
            f"  source {run_env}        # DATABASE_URL and PORT of this stack, for the CLI",
            f"  {flask} users create {EXAMPLE_USER}",
            f"  USER_ID=$({flask} users id {EXAMPLE_USER})   # a signed-in checkout names its user",
            f"  {flask} events send checkout.session.completed --email {EXAMPLE_USER}"
            ' --user "$USER_ID"',
            f"  {flask} events send customer.subscription.created --email {EXAMPLE_USER}",
            f"  {flask} users show {EXAMPLE_USER}",
            f"  TOKEN=$({flask} users token {EXAMPLE_USER})",
            "  # a checkout as the frontend makes it: open the URL it answers, press Pay",
            '  curl -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \\',
            f'       -d \'{{"priceId": "price_demo_pro_github", "mode": "payment", "successUrl":'
            f' "{base}/", "cancelUrl": "{base}/"}}\' \\',
            f"       {base}/api/payments/create-checkout",
            '  curl -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \\',
            f'       -d \'{{"returnUrl": "{base}/"}}\' {base}/api/payments/create-portal',
            "  make demo                # the whole loop, on its own, in under 30 s",
        ]
    )


def auth_lines(settings: Settings) -> list[str]:
    """Where a browser page signs in, when the Supabase Auth stand-in serves (docs/local.md)."""
    key = settings.supabase_publishable_key
    if not key or key.get_secret_value() != auth_stand_in.PUBLISHABLE_KEY:
        return []
    url = str(settings.supabase_url).rstrip("/")
    return [
        f"Auth       {url}/auth/v1 (Supabase Auth stand-in; magic links land in the outbox)",
        f"           SUPABASE_URL={url} SUPABASE_PUBLISHABLE_KEY={auth_stand_in.PUBLISHABLE_KEY}",
    ]


def serve() -> None:
    """Prepare, then serve until interrupted (Ctrl-C or SIGTERM); stop what was started."""
    signal.signal(signal.SIGINT, stop_once)
    signal.signal(signal.SIGTERM, stop_once)
    logs.configure(json_output=False)
    with contextlib.ExitStack() as stack:
        settings, auth = local_stack.with_auth_stand_in(Settings())
        container = local_stack.start(settings, stack, auth=auth)
        settings = container.settings
        server = local_stack.api_server(
            container, host=settings.dev_host, port=settings.port, auth=auth
        )
        stack.callback(server.server_close)
        print(banner(settings, write_run_env(settings, stack)), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


if __name__ == "__main__":
    serve()
