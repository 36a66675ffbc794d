"""Amounts in Stripe's minor units, as an e-mail shows them."""

from __future__ import annotations

import re
from decimal import Decimal

# Stripe's zero-decimal currencies, and the ISO 4217 three-decimal ones it supports.
_ZERO_DECIMAL = frozenset(
    {"bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga"}
    | {"pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf"}
)
_THREE_DECIMAL = frozenset({"bhd", "jod", "kwd", "omr", "tnd"})
_SYMBOLS = {
    "usd": "$",
    "eur": "€",
    "gbp": "£",
    "jpy": "¥",
    "inr": "₹",
    "krw": "₩",
    "cad": "CA$",
    "aud": "A$",
    "nzd": "NZ$",
    "brl": "R$",
    "mxn": "MX$",
}


def format_amount(minor_units: int, currency: str) -> str:
    """An amount in Stripe's minor units as a display string, e.g. 4900, 'usd' -> '$49.00'."""
    code = currency.strip().lower()
    if not re.fullmatch(r"[a-z]{3}", code):
        raise ValueError(f"not an ISO 4217 currency code: {currency!r}")
    exponent = 0 if code in _ZERO_DECIMAL else 3 if code in _THREE_DECIMAL else 2
    number = f"{Decimal(abs(minor_units)).scaleb(-exponent):,.{exponent}f}"
    sign = "-" if minor_units < 0 else ""
    symbol = _SYMBOLS.get(code)
    return f"{sign}{symbol}{number}" if symbol else f"{sign}{code.upper()} {number}"


def format_major(amount: Decimal, currency: str) -> str:
    """An amount in major units (a catalogue price, `29.00`) as a display string, `$29.00`."""
    code = currency.strip().lower()
    exponent = 0 if code in _ZERO_DECIMAL else 3 if code in _THREE_DECIMAL else 2
    return format_amount(int(amount.scaleb(exponent).to_integral_value()), code)


def to_minor(amount: Decimal, currency: str) -> Decimal:
    """An amount in major units (a catalogue price) in the currency's minor units, as Stripe
    counts them: `29.00`, 'usd' -> 2900; `500`, 'jpy' -> 500."""
    code = currency.strip().lower()
    exponent = 0 if code in _ZERO_DECIMAL else 3 if code in _THREE_DECIMAL else 2
    return amount.scaleb(exponent)
