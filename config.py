"""Typed settings, read once from the environment (and `.env` under `make run`)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from limits import parse_many
from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict
from pydantic import (
    AliasChoices,
    AnyHttpUrl,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

# The subscriber targets: each a Cloud Run service fed by a push subscription of its own (the
# in-process bus, `bin/serve` and the deploy take their names from here, through
# `subscribers.TARGETS`). Here because FUNCTION_TARGET is checked against it, and this module
# imports nothing of the project.
TARGETS: tuple[str, ...] = ("access", "emails")

# A fixed, public value so local runs and tests can sign webhooks without an account.
DEV_WEBHOOK_SECRET = "whsec_local_development_secret_do_not_use_in_production"  # noqa: S105
# Likewise for access tokens: `flask --app main users token` signs with it when no Supabase
# project is configured, so every authenticated route can be called locally.
DEV_JWT_SECRET = "local-development-jwt-secret-do-not-use-in-production"  # noqa: S105
# The JWT secret every local Supabase stack (`supabase start`) signs with: public too.
SUPABASE_LOCAL_JWT_SECRET = "super-secret-jwt-token-with-at-least-32-characters-long"  # noqa: S105
# The API keys every local Supabase stack (`supabase start`) prints: its legacy anon and
# service_role JWTs, and its `sb_` keys.
SUPABASE_LOCAL_KEYS = frozenset(
    {
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzdXBhYmFzZS1kZW1vIiwicm9sZSI6ImFub24iLCJl"
        "eHAiOjE5ODM4MTI5OTZ9.CRXP1A7WOeoJeXxjNni43kdQwgnWNReilDMblYTn_I0",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzdXBhYmFzZS1kZW1vIiwicm9sZSI6InNlcnZpY2Vf"
        "cm9sZSIsImV4cCI6MTk4MzgxMjk5Nn0.EGIM96RAZx35lJzdJsyH-qQwv8Hdp7fsn3W0YpN81IU",
        "sb_publishable_ACJWlzQHlZjBrEguHvfOxg_3BJgxAaH",
        "sb_secret_N7UND0UgjKTVK-Uodkm0Hg_xSvEMPvz",
    }
)
# Values published in this repository (.env.example, the docs) or by Supabase's local stack:
# anyone can read them, so production treats them as unset.
PUBLIC_VALUES = frozenset(
    {
        *SUPABASE_LOCAL_KEYS,
        DEV_WEBHOOK_SECRET,
        DEV_JWT_SECRET,
        SUPABASE_LOCAL_JWT_SECRET,
        "postgresql://postgres.ref:password@aws-0-eu-west-1.pooler.supabase.com:5432/postgres",
        "postgresql://postgres.ref:password@aws-0-eu-west-1.pooler.supabase.com:6543/postgres"
        "?sslmode=require",
        "postgresql://postgres:postgres@127.0.0.1:54322/postgres",
        "https://app.example.com",
        "https://abcdefghijklmnop.supabase.co",
        "http://127.0.0.1:54321",
        "http://localhost:54321",
    }
)

# What each target cannot run without in production: it would fail open or silently
# otherwise. The secrets among them are exactly what the target's code reads
# (tests/deploy/test_secrets.py derives them from it), and what cloudbuild.yaml gives the
# service; the api needs RESEND_API_KEY too when ENABLE_TEST_EMAIL turns its test route on.
PRODUCTION_REQUIRED_BY_TARGET: dict[str, tuple[str, ...]] = {
    "api": (
        "database_url",
        "site_url",
        "supabase_url",
        "supabase_publishable_key",
        "stripe_secret_key",
        "stripe_publishable_key",
        "stripe_webhook_secret",
    ),
    "access": (
        "database_url",
        "site_url",
        "supabase_url",
        "supabase_secret_key",
        "stripe_secret_key",
    ),
    "emails": (
        "database_url",
        "site_url",
        "supabase_url",
        "supabase_secret_key",
        "resend_api_key",
    ),
}
# Every setting some target requires.
PRODUCTION_REQUIRED = tuple(
    dict.fromkeys(name for names in PRODUCTION_REQUIRED_BY_TARGET.values() for name in names)
)


# Optional secrets: production does without them, but refuses a public value when one is set.
PRODUCTION_OPTIONAL = ("supabase_jwt_secret", "github_token")


class MissingSecretsError(ValueError):
    """Production settings lack required secrets."""


def unsafe_reason(value: object) -> str | None:
    """Why a configured secret cannot be trusted in production, or None when it can."""
    if value is None:
        return "missing"
    text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    text = text.strip().rstrip("/")
    if not text:
        return "empty"
    # `sk_test_...` and the like: a placeholder copied from an example, not a key.
    if text in PUBLIC_VALUES or text.endswith("..."):
        return "a public example or development value"
    return None


_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})+")


def cors_origin_list(value: str) -> list[str]:
    """The origins of CORS_ORIGINS, without a trailing slash."""
    return [origin.strip().rstrip("/") for origin in value.split(",") if origin.strip()]


class Settings(BaseSettings):
    """Every setting of the service; names match the environment variables."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    app_env: Literal["development", "test", "production"] = "development"
    port: int = Field(default=8080, ge=1, le=65535)
    site_url: AnyHttpUrl | None = None
    auth_callback_url: str = "/dashboard"

    database_url: SecretStr | None = None
    # Connections each process's pool may hold. Summed over every process of every service, they
    # must stay under the Postgres pooler's client limit (docs/capacity.md). Fewer than the
    # process's threads is fine: a request then waits for a connection, 5 s at most.
    database_pool_size: int = Field(default=10, ge=1, le=100)
    # Seconds to open a connection (Supabase is an internet hop away), and the longest any one
    # statement may run (each transaction sets it: SET LOCAL works through transaction poolers).
    database_connect_timeout: int = Field(default=5, ge=1, le=60)
    database_statement_timeout: float = Field(default=15.0, gt=0, le=300)
    data_dir: Path = Path(".data")

    supabase_url: AnyHttpUrl | None = None
    # The project's API keys under the names Supabase uses today (`sb_publishable_...`,
    # `sb_secret_...`); the legacy JWT keys, under their legacy names, read as the same setting.
    supabase_publishable_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("supabase_publishable_key", "supabase_anon_key"),
    )
    supabase_secret_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("supabase_secret_key", "supabase_service_role_key"),
    )
    # The legacy HS256 secret: set before and during the move to signing keys, removed after.
    supabase_jwt_secret: SecretStr | None = None

    stripe_secret_key: SecretStr | None = None
    stripe_publishable_key: str | None = None
    stripe_webhook_secret: SecretStr | None = None
    stripe_api_base: AnyHttpUrl | None = None
    # The version of Stripe's API the service's own calls use (checkout and portal sessions,
    # subscriptions, events): the current one, what stripe-python 16 pins
    # (core/stripe_objects.py lists the versions whose events it reads).
    stripe_api_version: str = Field(
        default="2026-10-28.endive", pattern=r"^\d{4}-\d{2}-\d{2}(\.[a-z]+)?$"
    )

    # Checkout sessions ask Stripe for a recovery link, sent in the checkout-expired mail, that
    # reopens the same cart; with CHECKOUT_PROMOTIONS_CONSENT (US merchants only, as Stripe
    # offers it) Checkout asks for consent where the customer's locale needs it, and that mail
    # goes only to those who gave it.
    checkout_recovery: bool = True
    checkout_promotions_consent: bool = False

    # Origins (scheme://host[:port], exact) of frontends on other hosts that may call the API
    # from a browser, with credentials; none by default (comma-separated).
    cors_origins: str = ""
    # The domain the sign-in cookies are set for, so that a frontend on a sibling host of the
    # same parent (app.example.com beside api.example.com) sends them: `example.com`. Unset: the
    # API's host only.
    cookie_domain: str | None = None
    # How long a sign-in link works: Supabase Auth's "Email OTP Expiration" (3600 s unless
    # changed in the project's settings). The sign-in mail states it; keep the two equal.
    signin_link_lifetime_seconds: int = Field(default=3600, ge=60, le=86_400)

    resend_api_key: SecretStr | None = None
    resend_api_url: AnyHttpUrl | None = None
    email_from_noreply: str = "Acme <noreply@example.com>"
    email_from_admin: str = "Acme Team <hello@example.com>"
    support_email: str = "support@example.com"
    email_outbox_dir: Path = Path(".data/outbox")

    event_bus: Literal["inline", "pubsub"] = "inline"
    google_cloud_project: str = "local-project"
    pubsub_topic: str = "payment-events"
    pubsub_emulator_host: str | None = None
    # The in-process bus (local runs): past this many queued deliveries for access the webhook
    # answers 503 and Stripe retries, instead of memory growing without end; e-mail, which
    # yields to access during a burst, may queue up to the backlog (about 5 KB an event).
    inline_bus_max_pending: int = Field(default=2000, ge=1, le=1_000_000)
    inline_bus_max_backlog: int = Field(default=20_000, ge=1, le=1_000_000)

    enable_test_email: bool | None = None

    github_token: SecretStr | None = None
    github_api_url: AnyHttpUrl = AnyHttpUrl("https://api.github.com")

    # Every call to Stripe, Resend, GitHub and Supabase gives up after this many seconds, well
    # inside Pub/Sub's push acknowledgement deadline, so a stuck call fails and is retried.
    outbound_timeout_seconds: float = Field(default=8.0, gt=0, le=30)
    # Resend's account rate (2 requests per second by default); sends are paced to it.
    resend_rate_per_second: float = Field(default=2.0, gt=0, le=1000)

    # Per-client request limits ("N/second|minute|hour|day", `,` between several), per instance.
    rate_limit_lead: str = "10/minute,100/hour"
    rate_limit_sign_in: str = "20/minute"
    rate_limit_checkout: str = "10/minute,60/hour"
    rate_limit_portal: str = "10/minute"
    rate_limit_github_access: str = "5/minute,20/hour"
    rate_limit_me: str = "120/minute"
    rate_limit_test_email: str = "3/minute,20/hour"
    # Proxies that append to X-Forwarded-For in front of the app (Cloud Run: 1; with an
    # external load balancer in front of Cloud Run: 2); the client is the entry before them.
    trusted_proxy_hops: int = Field(default=1, ge=0, le=5)

    # Pub/Sub push authentication on the subscriber targets: the token's audience and account.
    # Unset, a push target refuses every push (401); production refuses to start without them.
    push_audience: str | None = None
    push_service_account: str | None = None
    push_certs_url: AnyHttpUrl = AnyHttpUrl("https://www.googleapis.com/oauth2/v1/certs")
    # Cloud Run's IAM invoker check is on (`--no-allow-unauthenticated`, no
    # `--no-invoker-iam-check`): it verifies the token and forwards it with its signature removed.
    # Off: the token arrives as Pub/Sub signed it and only a full signature is accepted.
    push_invoker_iam_check: bool = True

    # Interface `make run` listens on: loopback unless told otherwise.
    dev_host: str = "127.0.0.1"

    # How `bin/serve` runs: which target, and gunicorn's processes and threads per instance.
    function_target: str = "api"
    web_concurrency: int = Field(default=2, ge=1, le=64)
    gunicorn_threads: int = Field(default=8, ge=1, le=256)
    # How a subscriber target receives events: `push` (a Cloud Run service behind a push
    # subscription: the default) or `pull` (StreamingPull, in a worker pool or an always-on
    # service: access then applies up to PULL_BATCH_SIZE events in one transaction). Pull holds
    # at most PULL_MAX_MESSAGES leased at once; e-mail sends GUNICORN_THREADS at a time.
    subscriber_delivery: Literal["push", "pull"] = "push"
    pull_max_messages: int = Field(default=500, ge=1, le=10_000)
    pull_batch_size: int = Field(default=64, ge=1, le=500)
    # Set by Cloud Run on every instance: the service and revision that wrote a log line.
    k_service: str | None = None
    k_revision: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        # `NAME=` in an env file or a deploy sets an empty string: it means "not set", never "".
        field = cls.model_fields[info.field_name] if info.field_name else None
        blank = isinstance(value, str) and not value.strip()
        return None if blank and field is not None and field.default is None else value

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        # Exact origins only: a wildcard with credentials would let any site act as the user.
        for origin in cors_origin_list(value):
            parts = urlsplit(origin)
            exact = parts.scheme in ("http", "https") and parts.netloc and not parts.path
            if not exact or "*" in origin or parts.query or parts.fragment:
                raise ValueError(
                    f"CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port])"
                )
        return value

    @field_validator("cookie_domain")
    @classmethod
    def _cookie_domain(cls, value: str | None) -> str | None:
        if value is None:
            return None
        domain = value.strip().lstrip(".").lower()
        if not _DOMAIN.fullmatch(domain):
            raise ValueError("COOKIE_DOMAIN must be a domain such as example.com")
        return domain

    @field_validator("auth_callback_url")
    @classmethod
    def _path_only(cls, value: str) -> str:
        # A full URL here would turn the sign-in callback into an open redirect.
        parts = urlsplit(value)
        # Browsers read `/\host` as `//host`, another origin.
        starts_foreign = value.startswith(("//", "/\\"))
        if parts.scheme or parts.netloc or not value.startswith("/") or starts_foreign:
            raise ValueError("AUTH_CALLBACK_URL must be a path starting with '/'")
        return value

    @field_validator(
        "rate_limit_lead",
        "rate_limit_sign_in",
        "rate_limit_checkout",
        "rate_limit_portal",
        "rate_limit_github_access",
        "rate_limit_me",
        "rate_limit_test_email",
    )
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        try:
            parse_many(value)
        except ValueError as exc:
            raise ValueError(f"not a rate limit like '10/minute': {value!r}") from exc
        return value

    @model_validator(mode="after")
    def _keys_in_their_places(self) -> Settings:
        # A secret key where a publishable one belongs would be handed to browsers' requests
        # and to every client of the anon role: refused whatever the environment.
        if supabase_key_role(secret(self.supabase_publishable_key)) == "secret":
            raise ValueError(
                "SUPABASE_PUBLISHABLE_KEY holds a secret key (sb_secret_ or a service_role JWT);"
                " it takes the publishable (anon) key"
            )
        if supabase_key_role(secret(self.supabase_secret_key)) == "publishable":
            raise ValueError(
                "SUPABASE_SECRET_KEY holds a publishable key (sb_publishable_ or an anon JWT);"
                " it takes the secret (service_role) key"
            )
        return self

    @model_validator(mode="after")
    def _push_pair(self) -> Settings:
        if (self.push_audience is None) != (self.push_service_account is None):
            raise ValueError("set PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT together, or neither")
        return self

    @model_validator(mode="after")
    def _pull_target(self) -> Settings:
        if self.subscriber_delivery == "pull" and self.function_target not in TARGETS:
            raise ValueError(
                "SUBSCRIBER_DELIVERY=pull is for a subscriber target: set FUNCTION_TARGET to"
                f" one of {', '.join(TARGETS)}, not {self.function_target!r}"
            )
        if self.subscriber_delivery == "pull" and self.event_bus != "pubsub":
            raise ValueError("SUBSCRIBER_DELIVERY=pull reads Pub/Sub: set EVENT_BUS=pubsub")
        return self

    @field_validator("function_target")
    @classmethod
    def _known_target(cls, value: str) -> str:
        targets = ("api", *TARGETS)
        if value not in targets:
            raise ValueError(f"FUNCTION_TARGET must be one of {', '.join(targets)}, not {value!r}")
        return value

    @model_validator(mode="after")
    def _production_database(self) -> Settings:
        if self.is_production and self.database_url is not None:
            problem = database_url_problem(self.database_url.get_secret_value())
            if problem:
                raise MissingSecretsError(f"APP_ENV=production refuses DATABASE_URL: {problem}")
        return self

    @model_validator(mode="after")
    def _production_secrets(self) -> Settings:
        if self.app_env != "production":
            return self
        missing = [name.upper() for name in self.production_required if getattr(self, name) is None]
        if missing:
            raise MissingSecretsError(
                "APP_ENV=production refuses to start; missing: " + ", ".join(missing)
            )
        unsafe = [
            f"{name.upper()} ({reason})"
            for name in (*PRODUCTION_REQUIRED, *PRODUCTION_OPTIONAL)
            if getattr(self, name) is not None and (reason := unsafe_reason(getattr(self, name)))
        ]
        if unsafe:
            raise MissingSecretsError(
                "APP_ENV=production refuses to start; unsafe: " + ", ".join(unsafe)
            )
        if self.event_bus != "pubsub":
            raise MissingSecretsError("APP_ENV=production requires EVENT_BUS=pubsub")
        return self

    @model_validator(mode="after")
    def _production_push(self) -> Settings:
        # Without them a push target could not tell Pub/Sub's pushes from anyone's.
        pushed = self.function_target in TARGETS and self.subscriber_delivery == "push"
        if self.is_production and pushed and self.push_audience is None:
            raise MissingSecretsError(
                f"APP_ENV=production refuses to start; the {self.function_target} push target"
                " checks Pub/Sub's push token: set PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT"
            )
        return self

    @property
    def production_required(self) -> tuple[str, ...]:
        """What this process's target needs in production (PRODUCTION_REQUIRED_BY_TARGET)."""
        required = PRODUCTION_REQUIRED_BY_TARGET[self.function_target]
        if self.function_target == "api" and self.test_email_enabled:
            required = (*required, "resend_api_key")
        return required

    @property
    def is_production(self) -> bool:
        return self.app_env == "production"

    @property
    def json_logs(self) -> bool:
        """One JSON object a line, as Cloud Logging reads them: in production, and wherever
        Cloud Run runs the service (it sets K_SERVICE), whatever APP_ENV says."""
        return self.is_production or self.k_service is not None

    @property
    def service_context(self) -> dict[str, str]:
        """Error Reporting's service context: Cloud Run's service and revision, else the target."""
        context = {"service": self.k_service or self.function_target}
        if self.k_revision:
            context["version"] = self.k_revision
        return context

    @property
    def test_email_enabled(self) -> bool:
        if self.enable_test_email is None:
            return not self.is_production
        return self.enable_test_email

    @property
    def auth_issuer(self) -> str | None:
        """The `iss` of the project's access tokens."""
        return f"{str(self.supabase_url).rstrip('/')}/auth/v1" if self.supabase_url else None

    @property
    def stripe_livemode(self) -> bool | None:
        """Whether the Stripe key is live (`sk_live_`, `rk_live_`), test, or unknown (None)."""
        key = secret(self.stripe_secret_key) or ""
        if key.startswith(("sk_live_", "rk_live_")):
            return True
        if key.startswith(("sk_test_", "rk_test_")):
            return False
        return None

    @property
    def webhook_secret(self) -> str:
        secret = self.stripe_webhook_secret
        return secret.get_secret_value() if secret else DEV_WEBHOOK_SECRET

    @property
    def jwt_secret(self) -> str | None:
        """The HS256 secret of access tokens: SUPABASE_JWT_SECRET, else (locally, without a
        Supabase project, whose tokens are then checked against its JWKS) the public dev value."""
        if self.supabase_jwt_secret is not None:
            return self.supabase_jwt_secret.get_secret_value()
        if self.is_production or self.supabase_url is not None:
            return None
        return DEV_JWT_SECRET

    @property
    def site_origin(self) -> str | None:
        if self.site_url is None:
            return None
        parts = urlsplit(str(self.site_url))
        return f"{parts.scheme}://{parts.netloc}"


def supabase_key_role(key: str | None) -> str | None:
    """`secret` or `publishable` for a Supabase API key of either generation, else None."""
    if not key:
        return None
    if key.startswith("sb_secret_"):
        return "secret"
    if key.startswith("sb_publishable_"):
        return "publishable"
    parts = key.split(".")
    if len(parts) == 3:  # a legacy key: a JWT whose `role` says which
        try:
            padded = parts[1] + "=" * (-len(parts[1]) % 4)
            role = json.loads(base64.urlsafe_b64decode(padded)).get("role")
        except (ValueError, AttributeError):
            return None
        return {"service_role": "secret", "anon": "publishable"}.get(role)
    return None


# sslmode values that make libpq refuse a connection without TLS.
TLS_SSLMODES = frozenset({"require", "verify-ca", "verify-full"})


def database_url_problem(url: str) -> str | None:
    """Why production must not use this Postgres URL, or None.

    Supabase's session pooler (port 5432 on *.pooler.supabase.com) caps all clients together at
    the project's pool size; the transaction pooler (6543) is what the pool sizes are planned
    for (docs/capacity.md). Traffic from Cloud Run to Supabase crosses the internet: TLS is
    required, except to a database on this machine (a Unix socket or loopback).
    """
    try:
        params = conninfo_to_dict(url)
    except ProgrammingError as exc:
        return f"not a Postgres connection string ({exc})"
    hosts = [h for h in str(params.get("host") or "").split(",") if h]
    ports = [p for p in str(params.get("port") or "5432").split(",") if p]
    for host, port in zip(hosts, ports * len(hosts), strict=False):
        if host.endswith(".pooler.supabase.com") and port == "5432":
            return (
                "it names Supabase's session pooler (port 5432), which caps every instance"
                " together at the project's pool size; use the Transaction pooler's string"
                " (port 6543) from the dashboard's Connect panel"
            )
    local = all(h.startswith("/") or h in {"localhost", "127.0.0.1", "::1"} for h in hosts)
    if hosts and not local and params.get("sslmode") not in TLS_SSLMODES:
        return (
            "the connection may go unencrypted over the internet; add sslmode=require (or"
            " sslmode=verify-full with sslrootcert=<Supabase's CA>, docs/deploy.md)"
        )
    return None


def secret(value: SecretStr | None) -> str | None:
    """The plain value of an optional secret."""
    return value.get_secret_value() if value is not None else None
