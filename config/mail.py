"""E-mail and the brand it speaks for: Resend, the senders, the support inbox, the local outbox."""

from __future__ import annotations

from pathlib import Path

from pydantic import AnyHttpUrl, Field, SecretStr

from config.checks import Group
from config.environment import Environment


class MailSettings(Environment):
    # Unset: e-mails are written to EMAIL_OUTBOX_DIR (unset: DATA_DIR's `outbox`) as .eml files.
    resend_api_key: SecretStr | None = None
    resend_api_url: AnyHttpUrl | None = None
    # Resend's account rate (2 requests per second by default); sends are paced to it.
    resend_rate_per_second: float = Field(default=2.0, gt=0, le=1000)
    email_from_noreply: str = "Acme <noreply@example.com>"
    email_from_admin: str = "Acme Team <hello@example.com>"
    support_email: str = "support@example.com"
    # The product's name in e-mails; unset: EMAIL_FROM_ADMIN's display name (`product_name`).
    brand_name: str | None = None
    # Unset: `outbox` under DATA_DIR (`Settings` fills it in), so one DATA_DIR moves all local
    # state together.
    email_outbox_dir: Path = Path(".data/outbox")
    # Whether GET /api/test-email exists; unset: on outside production, off in production.
    enable_test_email: bool | None = None

    @property
    def product_name(self) -> str:
        """Who the e-mails speak for: BRAND_NAME, else the admin sender's display name without
        a trailing " Team" ("Acme Team <hello@...>" speaks for Acme)."""
        if self.brand_name and self.brand_name.strip():
            return self.brand_name.strip()
        name = self.email_from_admin.partition("<")[0].strip().strip('"')
        return name.removesuffix(" Team").strip() or "Acme"

    @property
    def test_email_enabled(self) -> bool:
        if self.enable_test_email is None:
            return not self.is_production
        return self.enable_test_email


GROUP = Group(
    fields=MailSettings,
    # The emails target sends through Resend, an admin's resends too (the api hands them on:
    # support/service.py); the api sends only while its test route is on
    # (`Settings.production_required`).
    required={"emails": ("resend_api_key",)},
)
