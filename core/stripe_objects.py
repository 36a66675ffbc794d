"""Where each fact lives in Stripe's objects, in every API version the service reads.

A webhook endpoint sends events at its own API version (a new account's is the current one;
an endpoint made earlier keeps its version). Between 2023-08-16 and the current generation,
Stripe moved some of what the service reads (Stripe's changelog, 2025-03-31.basil):

- an invoice's subscription: `invoice.subscription` became
  `invoice.parent.subscription_details.subscription`;
- an invoice line's price: `line.price` became `line.pricing.price_details.price` (an id);
- a subscription's billing period: `current_period_start` / `current_period_end` moved from the
  subscription onto each of its items;
- invoices take several payments ("multiple partial payments on invoices"): `payment_intent`,
  `charge` and `paid` left the Invoice, and `invoice` left the Charge and the PaymentIntent.

Every reader here takes either shape; where a fact is absent the answer is None, and what is
said to a customer then says less rather than something untrue.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core.events import stripe_id

# The version the service has always pinned, and the current generation: from basil
# (2025-03-31) to endive (2026-10-28, what stripe-python 16 pins). Their releases are named
# alphabetically after plants; a version outside these is not read (see `is_supported`).
PINNED_VERSION = "2023-08-16"
CURRENT_VERSION = "2026-10-28.endive"
_GENERATION = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})\.(?P<name>basil|clover|dahlia|endive)$")
OLDEST_CURRENT = "2025-03-31"
SUPPORTED = f"{PINNED_VERSION}, or {OLDEST_CURRENT}.basil to {CURRENT_VERSION}"


def is_supported(api_version: str | None) -> bool:
    """Whether events of this API version are read in full (None: not said, as in tests)."""
    if api_version is None or api_version == PINNED_VERSION:
        return True
    found = _GENERATION.match(api_version)
    return bool(found and OLDEST_CURRENT <= found["date"] <= CURRENT_VERSION[:10])


def invoice_subscription(invoice: Mapping[str, Any]) -> str | None:
    """The subscription an invoice bills, if any."""
    legacy = stripe_id(invoice.get("subscription"))
    if legacy:
        return legacy
    details = _mapping(_mapping(invoice.get("parent")).get("subscription_details"))
    return stripe_id(details.get("subscription"))


def line_price(line: Mapping[str, Any]) -> str | None:
    """The price of an invoice line."""
    legacy = stripe_id(line.get("price"))
    if legacy:
        return legacy
    details = _mapping(_mapping(line.get("pricing")).get("price_details"))
    return stripe_id(details.get("price"))


def invoice_price(invoice: Mapping[str, Any]) -> str | None:
    """The price of an invoice's first line (a subscription's invoice has one per plan)."""
    return line_price(_first_line(invoice))


def charged_line(invoice: Mapping[str, Any]) -> Mapping[str, Any]:
    """The line an invoice charges for: a plan change's proration invoice
    (`subscription_update`) credits the old plan's unused time first, so its plan is the last
    line that charges; any other invoice's is its first line."""
    if invoice.get("billing_reason") == "subscription_update":
        lines = _mapping(invoice.get("lines")).get("data")
        charged = [
            _mapping(line)
            for line in (lines if isinstance(lines, list) else [])
            if (_int(_mapping(line).get("amount")) or 0) > 0
        ]
        if charged:
            return charged[-1]
    return _first_line(invoice)


def charged_price(invoice: Mapping[str, Any]) -> str | None:
    """The price an invoice charges for (a plan change's: the new plan's)."""
    return line_price(charged_line(invoice))


def invoice_period(invoice: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The service period the invoice's first line covers (start, end), as Unix times."""
    period = _mapping(_first_line(invoice).get("period"))
    return _int(period.get("start")), _int(period.get("end"))


def subscription_period_end(subscription: Mapping[str, Any]) -> int | None:
    """When the subscription's current period ends: on the subscription (2023-08-16), else the
    latest end among its items (the current generation)."""
    legacy = _int(subscription.get("current_period_end"))
    if legacy is not None:
        return legacy
    items = _mapping(subscription.get("items")).get("data")
    ends = [
        end
        for item in (items if isinstance(items, list) else [])
        if (end := _int(_mapping(item).get("current_period_end"))) is not None
    ]
    return max(ends) if ends else None


def customer_contact(obj: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The buyer's e-mail address and name an object carries (a checkout's customer details, an
    invoice's customer fields, or our own events' `email` and `name`): the same in every
    version."""
    details = _mapping(obj.get("customer_details"))
    email = details.get("email") or obj.get("customer_email") or obj.get("email")
    name = details.get("name") or obj.get("customer_name") or obj.get("name")
    return (
        email if isinstance(email, str) and email else None,
        name if isinstance(name, str) and name else None,
    )


def invoice_link(invoice: Mapping[str, Any]) -> str | None:
    """The invoice's hosted page (the same field in every version)."""
    found = invoice.get("hosted_invoice_url")
    return found if isinstance(found, str) and found else None


def charge_payment_intent(charge: Mapping[str, Any]) -> str | None:
    """The payment a charge belongs to (the same field in every version)."""
    return stripe_id(charge.get("payment_intent"))


def charge_invoice(charge: Mapping[str, Any]) -> str | None:
    """The invoice a charge paid, where the version still says so (2023-08-16); None at the
    current versions, where a charge no longer names it: the caller must not read None as
    "no invoice"."""
    return stripe_id(charge.get("invoice"))


def _first_line(invoice: Mapping[str, Any]) -> Mapping[str, Any]:
    lines = _mapping(invoice.get("lines")).get("data")
    return _mapping(lines[0]) if isinstance(lines, list) and lines else {}


@dataclass(frozen=True)
class Amounts:
    """What a buyer was charged, as a checkout session or an invoice says it, in minor units of
    `currency`: `subtotal` before discounts and tax, `tax` (None: the object says nothing of
    tax), `total`; whether the tax is included in the prices; the tax ids the buyer gave; and,
    under Adaptive Pricing, what the buyer was charged in their own currency where it differs
    (`presentment_*`)."""

    currency: str | None
    total: int | None
    subtotal: int | None = None
    discount: int = 0
    tax: int | None = None
    tax_inclusive: bool = False
    tax_ids: tuple[str, ...] = ()
    presentment_currency: str | None = None
    presentment_amount: int | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"tax_ids": list(self.tax_ids)}

    @classmethod
    def from_json(cls, found: Any) -> Amounts | None:
        """Amounts written by `as_json` (an app event's), or None for anything else."""
        if not isinstance(found, Mapping) or set(found) != set(cls.__dataclass_fields__):
            return None
        try:
            return cls(**{**found, "tax_ids": tuple(str(t) for t in found["tax_ids"] or ())})
        except TypeError:
            return None


def session_amounts(session: Mapping[str, Any]) -> Amounts:
    """A checkout session's amounts: `amount_subtotal`, `total_details` (`amount_discount`,
    `amount_tax`), `amount_total` in `currency`; the tax ids of `customer_details.tax_ids`; and
    Adaptive Pricing's `presentment_details` (since 2025-03-31.basil the session's `currency`
    stays the integration's and the buyer's currency is there; before, `currency` was the
    buyer's and `currency_conversion` held the integration's, so `currency` is what was
    charged)."""
    totals = _mapping(session.get("total_details"))
    subtotal, total = _int(session.get("amount_subtotal")), _int(session.get("amount_total"))
    discount, tax = _int(totals.get("amount_discount")) or 0, _int(totals.get("amount_tax"))
    presented = _mapping(session.get("presentment_details"))
    currency = _currency(session.get("currency"))
    shown = _currency(presented.get("presentment_currency"))
    differs = shown is not None and shown != currency
    return Amounts(
        currency=currency,
        total=total,
        subtotal=subtotal,
        discount=discount,
        tax=tax,
        # Stripe's subtotal holds an inclusive tax already: nothing is added on top of it.
        tax_inclusive=bool(tax) and subtotal is not None and subtotal - discount == total,
        tax_ids=_tax_ids(_mapping(session.get("customer_details")).get("tax_ids")),
        presentment_currency=shown if differs else None,
        presentment_amount=_int(presented.get("presentment_amount")) if differs else None,
    )


def invoice_amounts(invoice: Mapping[str, Any]) -> Amounts:
    """An invoice's amounts: `subtotal`, `total_discount_amounts`, `total` (what was due before
    any credit balance: the mail says `amount_paid` too), its tax as
    `total_taxes` lists it (since 2025-03-31.basil; `tax` and `total_tax_amounts` before) and
    the buyer's `customer_tax_ids`."""
    taxes = invoice.get("total_taxes")
    if not isinstance(taxes, list):
        taxes = invoice.get("total_tax_amounts")
    tax: int | None = _int(invoice.get("tax"))
    inclusive = False
    if isinstance(taxes, list):
        found = [_mapping(t) for t in taxes]
        tax = sum(_int(t.get("amount")) or 0 for t in found)
        inclusive = bool(found) and all(
            t.get("tax_behavior") == "inclusive" or t.get("inclusive") is True for t in found
        )
    discounts = invoice.get("total_discount_amounts")
    found_discounts = discounts if isinstance(discounts, list) else []
    discount = sum(_int(_mapping(d).get("amount")) or 0 for d in found_discounts)
    return Amounts(
        currency=_currency(invoice.get("currency")),
        total=_int(invoice.get("total")),
        subtotal=_int(invoice.get("subtotal")),
        discount=discount,
        tax=tax,
        tax_inclusive=inclusive,
        tax_ids=_tax_ids(invoice.get("customer_tax_ids")),
    )


@dataclass(frozen=True)
class Trial:
    """A subscription on a free trial, as its buyer is told it: when it ends, what the first
    charge is (minor units of `currency`; None when it cannot be said exactly: a discount, a
    metered item, several currencies), how often after, whether a payment method is on file,
    and what Stripe does at the end without one
    (`trial_settings.end_behavior.missing_payment_method`)."""

    trial_end: int
    first_charge: int | None = None
    currency: str | None = None
    interval: str | None = None  # month or year; None: another period
    has_card: bool = False
    without_card: str = "cancel"  # cancel, pause or create_invoice

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, found: Any) -> Trial | None:
        """A trial written by `as_json` (an app event's), or None for anything else."""
        if not isinstance(found, Mapping) or set(found) != set(cls.__dataclass_fields__):
            return None
        if not isinstance(found["trial_end"], int):
            return None
        try:
            return cls(**found)
        except TypeError:
            return None


def subscription_trial(subscription: Any) -> Trial | None:
    """The trial a subscription is on (status `trialing` with a `trial_end`), else None."""
    sub = _mapping(subscription)
    trial_end = _int(sub.get("trial_end"))
    if sub.get("status") != "trialing" or trial_end is None:
        return None
    behaviour = _mapping(_mapping(sub.get("trial_settings")).get("end_behavior")).get(
        "missing_payment_method"
    )
    first, currency = _first_charge(sub)
    return Trial(
        trial_end=trial_end,
        first_charge=first,
        currency=currency,
        interval=_interval(sub),
        has_card=bool(sub.get("default_payment_method") or sub.get("default_source")),
        without_card=behaviour if behaviour in ("pause", "create_invoice") else "cancel",
    )


def _first_charge(sub: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The items' prices times their quantities, when every item says so in one currency and
    no discount changes it."""
    if sub.get("discount") or sub.get("discounts"):
        return None, None
    items = _mapping(sub.get("items")).get("data")
    if not isinstance(items, list) or not items:
        return None, None
    total, currencies = 0, set()
    for item in (_mapping(i) for i in items):
        price = _mapping(item.get("price"))
        unit, quantity = _int(price.get("unit_amount")), _int(item.get("quantity"))
        if unit is None or _mapping(price.get("recurring")).get("usage_type") == "metered":
            return None, None
        total += unit * (quantity if quantity is not None else 1)
        currencies.add(_currency(price.get("currency")))
    [currency] = currencies if len(currencies) == 1 else [None]
    return (total, currency) if currency else (None, None)


def _interval(sub: Mapping[str, Any]) -> str | None:
    items = _mapping(sub.get("items")).get("data")
    first = _mapping(items[0]) if isinstance(items, list) and items else {}
    recurring = _mapping(_mapping(first.get("price")).get("recurring"))
    found, count = recurring.get("interval"), recurring.get("interval_count")
    return found if found in ("month", "year") and count in (None, 1) else None


def merchant_of_record(obj: Mapping[str, Any]) -> bool:
    """Whether Stripe sold it as merchant of record (a Managed Payments session)."""
    return _mapping(obj.get("managed_payments")).get("enabled") is True


def _tax_ids(found: Any) -> tuple[str, ...]:
    """Tax ids as a buyer reads them: `DE123456789 (EU VAT)`."""
    if not isinstance(found, list):
        return ()
    ids = []
    for tax_id in (_mapping(t) for t in found):
        value, kind = tax_id.get("value"), tax_id.get("type")
        if isinstance(value, str) and value:
            label = str(kind).replace("_", " ").upper() if isinstance(kind, str) else ""
            ids.append(f"{value} ({label})" if label else value)
    return tuple(ids)


def _currency(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) and re.fullmatch(r"[A-Za-z]{3}", value) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class StripeProduct:
    """A product as Stripe holds it now: the object, all its prices, its features' keys."""

    product: Mapping[str, Any]
    prices: Sequence[Mapping[str, Any]]
    features: Sequence[str]
    feature_names: Mapping[str, str] = field(default_factory=dict)  # key -> display name


def checkout_quantity(session: Mapping[str, Any]) -> int | None:
    """The quantity of a checkout session's (first) line item, when it was read with them: the
    seats a per-seat price was bought with (the buyer may change it on Stripe's page)."""
    return first_quantity(session.get("line_items"))


def first_quantity(items: Any) -> int | None:
    """The quantity of a list of line items' (or a subscription's items') first."""
    data = _mapping(items).get("data")
    first = data[0] if isinstance(data, list) and data else None
    return _int(_mapping(first).get("quantity"))


def lookup_keys(product_features: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lookup keys of a product's Entitlements features (`product_feature` objects)."""
    keys = []
    for found in product_features:
        feature = found.get("entitlement_feature") or {}
        if isinstance(feature, Mapping) and feature.get("lookup_key"):
            keys.append(str(feature["lookup_key"]))
    return keys


def display_names(product_features: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each Entitlements feature's display name (`name`) by its lookup key, where it has one."""
    names: dict[str, str] = {}
    for found in product_features:
        feature = found.get("entitlement_feature") or {}
        if not isinstance(feature, Mapping):
            continue
        key, name = feature.get("lookup_key"), feature.get("name")
        if isinstance(key, str) and key and isinstance(name, str) and name.strip():
            names[key] = name.strip()[:100]
    return names
