"""Supabase: the project's URL and API keys, the tokens' secret, and sign-in links' lifetime."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import AliasChoices, AnyHttpUrl, Field, SecretStr

from config.checks import Group, secret
from config.environment import Environment

if TYPE_CHECKING:
    from config.settings import Settings

# A fixed, public value so that `flask --app main users token` can sign access tokens when no
# Supabase project is configured, and every authenticated route can be called locally.
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


class SupabaseSettings(Environment):
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
    # How long a sign-in link works: Supabase Auth's "Email OTP Expiration" (3600 s unless
    # changed in the project's settings). The sign-in mail states it; keep the two equal.
    signin_link_lifetime_seconds: int = Field(default=3600, ge=60, le=86_400)
    # Whether the support API (/api/admin/...) asks an admin's token for a second factor
    # (Supabase MFA: `aal` = `aal2`). `off` is for development only: said at start-up, refused
    # in production.
    admin_mfa: Literal["required", "off"] = "required"

    @property
    def auth_issuer(self) -> str | None:
        """The `iss` of the project's access tokens."""
        return f"{str(self.supabase_url).rstrip('/')}/auth/v1" if self.supabase_url else None

    @property
    def jwt_secret(self) -> str | None:
        """The HS256 secret of access tokens: SUPABASE_JWT_SECRET, else (locally, without a
        Supabase project, whose tokens are then checked against its JWKS) the public dev value."""
        if self.supabase_jwt_secret is not None:
            return self.supabase_jwt_secret.get_secret_value()
        if self.is_production or self.supabase_url is not None:
            return None
        return DEV_JWT_SECRET


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


def problems(s: Settings) -> Iterator[str]:
    if s.is_production and s.admin_mfa != "required":
        yield "ADMIN_MFA must be `required` in production (an admin signs in with a second factor)"
    # A secret key where a publishable one belongs would be handed to browsers' requests and to
    # every client of the anon role: refused whatever the environment.
    if supabase_key_role(secret(s.supabase_publishable_key)) == "secret":
        yield (
            "SUPABASE_PUBLISHABLE_KEY holds a secret key (sb_secret_ or a service_role JWT);"
            " it takes the publishable (anon) key"
        )
    if supabase_key_role(secret(s.supabase_secret_key)) == "publishable":
        yield (
            "SUPABASE_SECRET_KEY holds a publishable key (sb_publishable_ or an anon JWT);"
            " it takes the secret (service_role) key"
        )


GROUP = Group(
    fields=SupabaseSettings,
    # The api checks tokens and asks Auth for sign-in; the subscribers make guest buyers'
    # accounts and sign-in links with the secret key, and access deletes a leaving person's
    # Auth user with it (the api hands it the deletion: accounts/leaving.py).
    required={
        "api": ("supabase_url", "supabase_publishable_key"),
        "access": ("supabase_url", "supabase_secret_key"),
        "emails": ("supabase_url", "supabase_secret_key"),
    },
    optional_secrets=("supabase_jwt_secret",),
    # The local stack's keys and secret, the development token secret, and the examples.
    public_values=frozenset(
        {
            *SUPABASE_LOCAL_KEYS,
            DEV_JWT_SECRET,
            SUPABASE_LOCAL_JWT_SECRET,
            "https://abcdefghijklmnop.supabase.co",
            "http://127.0.0.1:54321",
            "http://localhost:54321",
        }
    ),
    problems=problems,
)
