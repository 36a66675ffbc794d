"""Stripe: the keys, the webhook's signing secret, the API the service calls, and Checkout's
options."""

from __future__ import annotations

from typing import Literal

from pydantic import AnyHttpUrl, Field, SecretStr

from config.checks import Group, secret
from config.environment import Environment

# A fixed, public value so local runs and tests can sign webhooks without an account.
DEV_WEBHOOK_SECRET = "whsec_local_development_secret_do_not_use_in_production"  # noqa: S105


class StripeSettings(Environment):
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
    # Stripe's redaction jobs (a preview API) under the preview version the Stripe account is
    # enrolled in (e.g. `2025-07-30.preview`): a deleted account's customers are redacted by
    # API. Unset (an account not in the preview), a founder's task asks for it by hand.
    stripe_redaction_api_version: str | None = Field(
        default=None, pattern=r"^\d{4}-\d{2}-\d{2}\.preview$"
    )
    checkout_recovery: bool = True
    checkout_promotions_consent: bool = False
    # Who handles tax on a sale (billing/rules.py sends each value's parameters): `none` (the
    # founder, outside Stripe), `stripe_tax` (Stripe Tax calculates and collects it, the founder
    # files), `managed_payments` (Stripe sells as merchant of record and files). Adaptive
    # Pricing (local currencies at Checkout): `on`, `off`, or unset to follow the dashboard.
    checkout_tax: Literal["none", "stripe_tax", "managed_payments"] = "none"
    checkout_adaptive_pricing: Literal["on", "off"] | None = None
    # A Stripe coupon offered once per customer to one cancelling (POST /api/payments/cancel);
    # unset, a cancellation is made as asked, with no offer.
    retention_coupon: str | None = Field(default=None, min_length=1, max_length=255)

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
    def products_need_tax_code(self) -> bool:
        """Whether the catalogue sells only products with a tax code: Managed Payments taxes
        a product by its code, and Stripe refuses a session for one without an eligible one."""
        return self.checkout_tax == "managed_payments"

    @property
    def webhook_secret(self) -> str:
        secret = self.stripe_webhook_secret
        return secret.get_secret_value() if secret else DEV_WEBHOOK_SECRET


GROUP = Group(
    fields=StripeSettings,
    # The api opens checkouts and portals and verifies webhooks; access reads subscriptions.
    required={
        "api": ("stripe_secret_key", "stripe_publishable_key", "stripe_webhook_secret"),
        "access": ("stripe_secret_key",),
    },
    public_values=frozenset({DEV_WEBHOOK_SECRET}),
)
