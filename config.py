"""Typed settings, read once from the environment (and `.env` under `make run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from subscribers import TARGETS

# A fixed, public value so local runs and tests can sign webhooks without an account.
DEV_WEBHOOK_SECRET = "whsec_local_development_secret_do_not_use_in_production"  # noqa: S105
# Likewise for access tokens: `flask --app main users token` signs with it when no Supabase
# project is configured, so every authenticated route can be called locally.
DEV_JWT_SECRET = "local-development-jwt-secret-do-not-use-in-production"  # noqa: S105

# Secrets production cannot run without: the service would fail open or silently otherwise.
PRODUCTION_REQUIRED = (
    "database_url",
    "site_url",
    "supabase_url",
    "supabase_anon_key",
    "supabase_service_role_key",
    "stripe_secret_key",
    "stripe_publishable_key",
    "stripe_webhook_secret",
    "resend_api_key",
)


class MissingSecretsError(ValueError):
    """Production settings lack required secrets."""


class Settings(BaseSettings):
    """Every setting of the service; names match the environment variables."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    app_env: Literal["development", "test", "production"] = "development"
    port: int = Field(default=8080, ge=1, le=65535)
    site_url: AnyHttpUrl | None = None
    auth_callback_url: str = "/dashboard"

    database_url: SecretStr | None = None
    data_dir: Path = Path(".data")

    supabase_url: AnyHttpUrl | None = None
    supabase_anon_key: SecretStr | None = None
    supabase_service_role_key: SecretStr | None = None
    supabase_jwt_secret: SecretStr | None = None

    stripe_secret_key: SecretStr | None = None
    stripe_publishable_key: str | None = None
    stripe_webhook_secret: SecretStr | None = None
    stripe_api_base: AnyHttpUrl | None = None
    stripe_api_version: str = "2023-08-16"

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

    enable_test_email: bool | None = None

    github_token: SecretStr | None = None
    github_api_url: AnyHttpUrl = AnyHttpUrl("https://api.github.com")

    # Every call to Stripe, Resend, GitHub and Supabase gives up after this many seconds, well
    # inside Pub/Sub's push acknowledgement deadline, so a stuck call fails and is retried.
    outbound_timeout_seconds: float = Field(default=8.0, gt=0, le=30)
    # Resend's account rate (2 requests per second by default); sends are paced to it.
    resend_rate_per_second: float = Field(default=2.0, gt=0, le=1000)

    # How `bin/serve` runs: which target, and gunicorn's processes and threads per instance.
    function_target: str = "api"
    web_concurrency: int = Field(default=2, ge=1, le=64)
    gunicorn_threads: int = Field(default=8, ge=1, le=256)

    @field_validator("auth_callback_url")
    @classmethod
    def _path_only(cls, value: str) -> str:
        # A full URL here would turn the sign-in callback into an open redirect.
        parts = urlsplit(value)
        if parts.scheme or parts.netloc or not value.startswith("/") or value.startswith("//"):
            raise ValueError("AUTH_CALLBACK_URL must be a path starting with '/'")
        return value

    @field_validator("function_target")
    @classmethod
    def _known_target(cls, value: str) -> str:
        targets = ("api", *TARGETS)
        if value not in targets:
            raise ValueError(f"FUNCTION_TARGET must be one of {', '.join(targets)}, not {value!r}")
        return value

    @model_validator(mode="after")
    def _production_secrets(self) -> Settings:
        if self.app_env != "production":
            return self
        missing = [name.upper() for name in PRODUCTION_REQUIRED if getattr(self, name) is None]
        if self.stripe_webhook_secret and self.webhook_secret == DEV_WEBHOOK_SECRET:
            missing.append("STRIPE_WEBHOOK_SECRET (the development value is public)")
        if secret(self.supabase_jwt_secret) == DEV_JWT_SECRET:
            missing.append("SUPABASE_JWT_SECRET (the development value is public)")
        if missing:
            raise MissingSecretsError(
                "APP_ENV=production refuses to start; missing: " + ", ".join(missing)
            )
        if self.event_bus != "pubsub":
            raise MissingSecretsError("APP_ENV=production requires EVENT_BUS=pubsub")
        return self

    @property
    def is_production(self) -> bool:
        return self.app_env == "production"

    @property
    def test_email_enabled(self) -> bool:
        if self.enable_test_email is None:
            return not self.is_production
        return self.enable_test_email

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


def secret(value: SecretStr | None) -> str | None:
    """The plain value of an optional secret."""
    return value.get_secret_value() if value is not None else None
