"""The frontend and the browsers that call the API: where sign-in lands, who may call, cookies,
how long the links it is sent work."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator

from config.checks import Group
from config.environment import Environment

# A fixed, public value so that lead removal links work locally without a setting.
DEV_LEAD_LINK_SECRET = "local-development-lead-link-secret-do-not-use-in-production"  # noqa: S105

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})+")


def cors_origin_list(value: str) -> list[str]:
    """The origins of CORS_ORIGINS, without a trailing slash."""
    return [origin.strip().rstrip("/") for origin in value.split(",") if origin.strip()]


class SiteSettings(Environment):
    # Sign-in redirects and e-mail links are built from it.
    site_url: AnyHttpUrl | None = None
    auth_callback_url: str = "/dashboard"
    # Origins (scheme://host[:port], exact) of frontends on other hosts that may call the API
    # from a browser, with credentials; none by default (comma-separated).
    cors_origins: str = ""
    # The domain the sign-in cookies are set for, so that a frontend on a sibling host of the
    # same parent (app.example.com beside api.example.com) sends them: `example.com`. Unset: the
    # API's host only.
    cookie_domain: str | None = None
    # How long a team invitation's accept link works; resending makes a new one.
    team_invitation_ttl_days: int = Field(default=7, ge=1, le=90)
    # The HMAC key of the links that remove a lead by its address (docs/leaving.md); unset
    # locally, a public development value; unset in production, no link is made or accepted.
    lead_link_secret: SecretStr | None = None

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

    @property
    def lead_link_key(self) -> str | None:
        if self.lead_link_secret is not None:
            return self.lead_link_secret.get_secret_value()
        return None if self.is_production else DEV_LEAD_LINK_SECRET

    @property
    def site_origin(self) -> str | None:
        if self.site_url is None:
            return None
        parts = urlsplit(str(self.site_url))
        return f"{parts.scheme}://{parts.netloc}"


GROUP = Group(
    fields=SiteSettings,
    # Links in e-mails and the sign-in redirect would point nowhere real.
    required={target: ("site_url",) for target in ("api", "access", "emails")},
    optional_secrets=("lead_link_secret",),
    # The example in .env.example and the docs, and the development lead link secret.
    public_values=frozenset({"https://app.example.com", DEV_LEAD_LINK_SECRET}),
)
