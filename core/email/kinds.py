"""Every e-mail kind, registered once: its props model, its subject, its sample and its sender.

Adding a kind is one entry here, its two templates (`templates/emails/<kind>.html` and
`.txt`), a sample in `core.email.samples` and, if an event calls for it, a builder in
`core.email.plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.email import subjects
from core.email.brand import Brand
from core.email.props import (
    CheckoutExpiredProps,
    EmailProps,
    GithubAccessGrantedProps,
    InvoicePaidProps,
    NewSignupProps,
    PaymentFailedProps,
    PurchaseConfirmationProps,
    SigninLinkProps,
    SubscriptionCancelledProps,
    TrialEndingProps,
)
from core.email.samples import SAMPLES


@dataclass(frozen=True)
class EmailKind:
    name: str
    props: type[EmailProps]
    subject: Callable[[Any, Brand], str]
    # Account mails go from EMAIL_FROM_NOREPLY (ShipFast's `resend.fromNoReply`); the rest from
    # EMAIL_FROM_ADMIN, to which a customer may reply.
    noreply: bool = False

    @property
    def sample(self) -> Mapping[str, Any]:
        return SAMPLES[self.name]


_ALL = (
    EmailKind("purchase-confirmation", PurchaseConfirmationProps, subjects.purchase),
    EmailKind("payment-failed", PaymentFailedProps, subjects.payment_failed),
    EmailKind("invoice-paid", InvoicePaidProps, subjects.invoice_paid),
    EmailKind("new-signup", NewSignupProps, subjects.signup),
    EmailKind("github-access-granted", GithubAccessGrantedProps, subjects.github),
    EmailKind("checkout-expired", CheckoutExpiredProps, subjects.checkout_expired),
    EmailKind("subscription-cancelled", SubscriptionCancelledProps, subjects.cancelled),
    EmailKind("signin-link", SigninLinkProps, subjects.signin, noreply=True),
    EmailKind("trial-ending", TrialEndingProps, subjects.trial_ending),
)
REGISTRY: dict[str, EmailKind] = {kind.name: kind for kind in _ALL}
KINDS: tuple[str, ...] = tuple(REGISTRY)
PROPS: dict[str, type[EmailProps]] = {kind.name: kind.props for kind in _ALL}
NOREPLY_KINDS = frozenset(kind.name for kind in _ALL if kind.noreply)


class UnknownEmailKind(ValueError):
    """The e-mail kind is not one of KINDS."""


def kind_of(name: str) -> EmailKind:
    """The registered kind of this name."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownEmailKind(f"unknown e-mail kind {name!r}; expected one of {KINDS}") from None


def props_model(name: str) -> type[EmailProps]:
    """The props model of an e-mail kind."""
    return kind_of(name).props


def sample_props(name: str) -> EmailProps:
    """The kind's sample, validated into its props model."""
    kind = kind_of(name)
    return kind.props.model_validate(kind.sample)
