"""The subject line of each e-mail kind, from its props; kept under SUBJECT_LIMIT characters."""

from __future__ import annotations

from core.email.brand import Brand
from core.email.props import (
    CheckoutExpiredProps,
    EmailProps,
    GithubAccessGrantedProps,
    InvoicePaidProps,
    PaymentFailedProps,
    PurchaseConfirmationProps,
    SubscriptionCancelledProps,
    TrialEndingProps,
)

# Longer subjects are cut in most inboxes' lists.
SUBJECT_LIMIT = 49


def _truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if space >= width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-(/\u2013\u2014") + "\u2026"


def _fit(prefix: str, value: str, suffix: str = "") -> str:
    return prefix + _truncate(value, SUBJECT_LIMIT - len(prefix) - len(suffix)) + suffix


def _fits(subject: str) -> bool:
    return len(subject) <= SUBJECT_LIMIT


def purchase(p: PurchaseConfirmationProps, _: Brand) -> str:
    return _fit("Order confirmed: ", p.product_name)


def payment_failed(p: PaymentFailedProps, _: Brand) -> str:
    subject = f"Action needed: your {p.amount} payment failed"
    return subject if _fits(subject) else "Action needed: your payment failed"


def invoice_paid(p: InvoicePaidProps, _: Brand) -> str:
    prefix = f"Receipt: {p.amount} for "
    # The product name needs room to say something; else the amount alone.
    if p.product_name is not None and len(prefix) <= SUBJECT_LIMIT - 15:
        return _fit(prefix, p.product_name)
    subject = f"Receipt: {p.amount} paid"
    return subject if _fits(subject) else _fit("Receipt for invoice ", p.invoice_number)


def signup(_: EmailProps, brand: Brand) -> str:
    return _fit("Welcome to ", brand.product_name)


def github(p: GithubAccessGrantedProps, _: Brand) -> str:
    return _fit("GitHub access granted: ", p.repository)


def checkout_expired(p: CheckoutExpiredProps, _: Brand) -> str:
    return _fit("Still thinking about ", p.product_name, "?")


def cancelled(p: SubscriptionCancelledProps, _: Brand) -> str:
    if p.access_ended:
        if p.product_name is None:
            return "Your subscription has ended"
        return _fit("Subscription ended: ", p.product_name)
    if p.product_name is None:
        return "Your subscription has been cancelled"
    return _fit("Subscription cancelled: ", p.product_name)


def signin(_: EmailProps, brand: Brand) -> str:
    return _fit("Sign in to ", brand.product_name)


def trial_ending(p: TrialEndingProps, _: Brand) -> str:
    day = f"{p.trial_end_date:%b} {p.trial_end_date.day}"
    return f"Your free trial ends on {day}"
