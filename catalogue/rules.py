"""The catalogue as Stripe holds it, read into the rows this service sells: one per price.

Stripe's own fields give the name, the description, the amount, its currency and tax behaviour,
the product's tax code and how it is billed; what this
service needs beyond them is read from the product's metadata, with the keys of `METADATA`
(documented once, in docs/deploy.md, "The catalogue"). Where the product has Stripe Entitlements
features, their lookup keys are its features instead of the metadata's. A product whose metadata
cannot be read is not sold: the reader says what is wrong, the caller logs it with the id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

# The product metadata the catalogue reads, and what each key means.
METADATA: Mapping[str, str] = {
    "type": "`link` (a download) or `github` (a repository invitation); required",
    "github_repo": "`owner/name`, required when `type` is `github`",
    "download_url": "the https address a `link` product's confirmation links to (optional)",
    "features": "comma-separated feature names (lowercase slugs) the product grants",
    "per_seat": "`true` when the price is per seat",
    "trial_days": "whole days of free trial checkout offers (1 to 730)",
    "featured": "`true` to list the product first",
    "credits": "`<feature>:<amount>[,<feature>:<amount>]`: the credits a purchase grants",
    "credits_period": "`period` (each paid period, unused ones end with it; the default) or `once`",
    "credits_expire_days": "whole days `once` credits are kept (1 to 3650; default: until used)",
    "meter": "the Stripe meter's event name that bills consumption beyond the credits",
    "overage_cap": "with `meter`: the overage units a subscription may be billed per period",
    "top_up": "`true` on a pack (`once` credits) its holders may choose for automatic top-up",
}

# Anchored with \Z, not $: `$` also matches before a final newline, which a name may not carry.
FEATURE = re.compile(r"\A[a-z0-9]+(?:[-_][a-z0-9]+)*\Z")
REPOSITORY = re.compile(r"\A[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}\Z")
TYPES = ("link", "github")
INTERVALS = ("month", "year")
LONGEST_TRIAL = 730
# A price's `tax_behavior` as Stripe gives it: whether its amount includes tax.
TAX_BEHAVIORS = ("inclusive", "exclusive", "unspecified")
CREDIT_PERIODS = ("period", "once")
LARGEST_CREDIT = 1_000_000_000  # an int4 ledger's sums stay far from overflow
LONGEST_CREDIT_DAYS = 3650
METER = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


@dataclass(frozen=True)
class EmailProduct:
    """What an e-mail's builder may know of the product an event is about."""

    name: str
    type: str
    billing: str  # one_time, month or year
    download_url: str | None
    github_repo: str | None
    # What a pack (`once` credits) adds to the buyer's balance: (feature, amount).
    credits_added: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ProductFacts:
    """What a readable product says, for every price of it."""

    id: str
    name: str
    description: str
    active: bool
    type: str
    github_repo: str | None
    download_url: str | None
    features: tuple[str, ...]
    per_seat: bool
    trial_days: int | None
    featured: bool
    tax_code: str | None = None  # Stripe Tax's classification (`txcd_...`), when set
    credits: tuple[tuple[str, int], ...] = ()  # (feature, amount) a purchase grants
    credits_period: str | None = None  # `period` or `once`, None without credits
    credits_expire_days: int | None = None
    meter: str | None = None  # the meter event consumption beyond the credits is billed on
    overage_cap: int | None = None  # the overage units billed per period at most; None: no cap
    top_up: bool = False  # a pack its holders may choose for automatic top-up
    # (key, display name) of its features that Stripe's Entitlements names
    feature_names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Listing:
    """One row of the catalogue: a price of a product, as `public.products` holds it."""

    stripe_price_id: str
    stripe_product_id: str
    name: str
    description: str
    price: Decimal
    type: str
    billing_type: str
    billing_interval: str | None
    trial_days: int | None
    is_active: bool
    is_featured: bool
    github_repo: str | None
    download_url: str | None
    features: tuple[str, ...]
    per_seat: bool
    currency: str | None = None  # lower-case ISO 4217, as Stripe gives it
    tax_behavior: str = "unspecified"
    tax_code: str | None = None
    credits: tuple[tuple[str, int], ...] = ()
    credits_period: str | None = None
    credits_expire_days: int | None = None
    meter: str | None = None
    feature_names: tuple[tuple[str, str], ...] = ()
    overage_cap: int | None = None
    top_up: bool = False


class Unreadable(ValueError):
    """A product or price the catalogue cannot hold; the message says what is wrong."""


def read_product(
    product: Mapping[str, Any],
    features: Sequence[str] = (),
    *,
    needs_tax_code: bool = False,
    feature_names: Mapping[str, str] | None = None,
) -> ProductFacts:
    """The facts of a Stripe product; `features` are the lookup keys of its Entitlements
    features (preferred over the metadata's); `needs_tax_code`: sold under Managed Payments,
    which taxes only a product with a tax code eligible for it. Raises Unreadable naming every
    problem."""
    meta = product.get("metadata") or {}
    problems: list[str] = []
    tax_code = tax_code_of(product)
    if needs_tax_code and tax_code is None:
        problems.append(
            "no tax code: Managed Payments (CHECKOUT_TAX) sells only products with a tax code"
            " eligible for it"
        )
    kind = str(meta.get("type", "")).strip()
    if kind not in TYPES:
        problems.append(f"metadata type is {kind!r}, not one of {', '.join(TYPES)}")
    repo = str(meta.get("github_repo", "")).strip() or None
    if kind == "github" and (repo is None or not REPOSITORY.match(repo)):
        problems.append(f"metadata github_repo is {repo!r}, not owner/name")
    if kind != "github" and repo is not None:
        problems.append("metadata github_repo is set on a product whose type is not github")
    download = str(meta.get("download_url", "")).strip() or None
    if download is not None and not download.startswith("https://"):
        problems.append(f"metadata download_url is {download!r}, not an https address")
    named = list(features) or [f.strip() for f in str(meta.get("features", "")).split(",")]
    names = tuple(dict.fromkeys(n for n in named if n))
    problems += [f"feature {n!r} is not a lowercase slug" for n in names if not FEATURE.match(n)]
    trial = _trial_days(meta.get("trial_days"), problems)
    per_seat = _flag(meta, "per_seat", problems)
    featured = _flag(meta, "featured", problems)
    credits, credits_period, expire_days = _credits(meta, problems)
    meter = str(meta.get("meter", "")).strip() or None
    if meter is not None and not METER.match(meter):
        problems.append(f"metadata meter is {meter!r}, not a meter event name")
    overage_cap = _overage_cap(meta, meter, problems)
    top_up = _flag(meta, "top_up", problems)
    if top_up and credits_period != "once":
        problems.append("metadata top_up is set on a product that is not a pack (`once` credits)")
    if problems:
        raise Unreadable("; ".join(problems))
    return ProductFacts(
        id=str(product["id"]),
        name=str(product.get("name") or ""),
        description=str(product.get("description") or ""),
        active=bool(product.get("active")),
        type=kind,
        github_repo=repo if kind == "github" else None,
        download_url=download if kind == "link" else None,
        features=names,
        feature_names=tuple(
            (n, (feature_names or {})[n]) for n in names if (feature_names or {}).get(n)
        ),
        per_seat=per_seat,
        trial_days=trial,
        featured=featured,
        tax_code=tax_code,
        credits=credits,
        credits_period=credits_period,
        credits_expire_days=expire_days,
        meter=meter,
        overage_cap=overage_cap,
        top_up=top_up,
    )


def _overage_cap(meta: Mapping[str, Any], meter: str | None, problems: list[str]) -> int | None:
    """The overage units a subscription's meter may bill per period (`overage_cap`), a whole
    number beside a `meter`; None when unset."""
    text = str(meta.get("overage_cap", "")).strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= LARGEST_CREDIT:
        problems.append(
            f"metadata overage_cap is {text!r}, not a whole number 1 to {LARGEST_CREDIT}"
        )
        return None
    if meter is None:
        problems.append("metadata overage_cap is set without a meter")
        return None
    return int(text)


def tax_code_of(product: Mapping[str, Any]) -> str | None:
    """A product's tax code id, expanded or not (None: Stripe Tax's preset applies)."""
    code = product.get("tax_code")
    if isinstance(code, Mapping):
        code = code.get("id")
    return code if isinstance(code, str) and code else None


def listing(facts: ProductFacts, price: Mapping[str, Any]) -> Listing:
    """The row for one price of a readable product. Raises Unreadable for what the table
    cannot hold (a tiered or metered price, an interval other than a month or a year)."""
    amount = price.get("unit_amount")
    if price.get("billing_scheme", "per_unit") != "per_unit" or not isinstance(amount, int):
        raise Unreadable("not a fixed amount per unit (tiered or customer-chosen)")
    recurring = price.get("recurring")
    interval: str | None = None
    if isinstance(recurring, Mapping):
        interval = str(recurring.get("interval"))
        if interval not in INTERVALS or recurring.get("interval_count", 1) != 1:
            raise Unreadable(f"billed every {recurring.get('interval_count', 1)} {interval}")
        if recurring.get("usage_type", "licensed") != "licensed":
            raise Unreadable("metered")
    if facts.credits_period == "period" and interval is None:
        raise Unreadable("credits_period is period on a one-time price (a pack is `once`)")
    nickname = str(price.get("nickname") or "").strip()
    behavior = str(price.get("tax_behavior") or "unspecified")
    currency = str(price.get("currency") or "").lower() or None
    return Listing(
        stripe_price_id=str(price["id"]),
        stripe_product_id=facts.id,
        name=f"{facts.name} ({nickname})" if nickname else facts.name,
        description=facts.description,
        price=Decimal(amount) / 100,
        type=facts.type,
        billing_type="subscription" if interval else "one_time",
        billing_interval=interval,
        trial_days=facts.trial_days if interval else None,
        is_active=facts.active and bool(price.get("active")),
        is_featured=facts.featured,
        github_repo=facts.github_repo,
        download_url=facts.download_url,
        features=facts.features,
        per_seat=facts.per_seat,
        currency=currency,
        tax_behavior=behavior if behavior in TAX_BEHAVIORS else "unspecified",
        tax_code=facts.tax_code,
        credits=facts.credits,
        credits_period=facts.credits_period,
        credits_expire_days=facts.credits_expire_days,
        meter=facts.meter,
        feature_names=facts.feature_names,
        overage_cap=facts.overage_cap,
        top_up=facts.top_up and interval is None,
    )


@dataclass(frozen=True)
class Catalogue:
    """What a read of Stripe's catalogue yields: the rows to sell, and what was left out."""

    listings: tuple[Listing, ...]
    problems: tuple[str, ...]  # each names the product or price and what is wrong


def catalogue_of(
    products: Sequence[Mapping[str, Any]],
    prices: Sequence[Mapping[str, Any]],
    features: Mapping[str, Sequence[str]],
    *,
    needs_tax_code: bool = False,
    feature_names: Mapping[str, Mapping[str, str]] | None = None,
) -> Catalogue:
    """The listings of these products' prices (`features`: Entitlements lookup keys by
    product id; `needs_tax_code`: see `read_product`). A product that cannot be read sells none
    of its prices."""
    problems: list[str] = []
    readable: dict[str, ProductFacts] = {}
    for product in products:
        try:
            found = features.get(product["id"], ())
            readable[str(product["id"])] = read_product(
                product,
                found,
                needs_tax_code=needs_tax_code,
                feature_names=(feature_names or {}).get(str(product["id"])),
            )
        except Unreadable as exc:
            problems.append(f"product {product['id']} is not sold: {exc}")
    listings: list[Listing] = []
    for price in prices:
        facts = readable.get(product_of(price) or "")
        if facts is None:
            continue  # its product is unreadable (said above) or not listed
        try:
            listings.append(listing(facts, price))
        except Unreadable as exc:
            problems.append(f"price {price['id']} of product {facts.id} is not sold: {exc}")
    return Catalogue(tuple(listings), tuple(problems))


def product_of(price: Mapping[str, Any]) -> str | None:
    """The product id of a price, its product expanded or not."""
    product = price.get("product")
    if isinstance(product, Mapping):
        product = product.get("id")
    return product if isinstance(product, str) and product else None


def _flag(meta: Mapping[str, Any], name: str, problems: list[str]) -> bool:
    value = str(meta.get(name, "")).strip().lower()
    if value not in ("", "true", "false"):
        problems.append(f"metadata {name} is {value!r}, not true or false")
    return value == "true"


def _trial_days(value: Any, problems: list[str]) -> int | None:
    text = str(value or "").strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= LONGEST_TRIAL:
        problems.append(f"metadata trial_days is {text!r}, not a whole number 1 to 730")
        return None
    return int(text)


def _credits(
    meta: Mapping[str, Any], problems: list[str]
) -> tuple[tuple[tuple[str, int], ...], str | None, int | None]:
    """The credits a product grants (`credits`), how (`credits_period`) and for how long a
    pack's are kept (`credits_expire_days`); each problem named with its key."""
    text = str(meta.get("credits", "")).strip()
    period = str(meta.get("credits_period", "")).strip().lower()
    days_text = str(meta.get("credits_expire_days", "")).strip()
    grants: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        feature, _, amount = (x.strip() for x in part.partition(":"))
        if not FEATURE.match(feature) or not amount.isdigit():
            problems.append(f"metadata credits has {part!r}, not <feature>:<amount>")
        elif not 1 <= int(amount) <= LARGEST_CREDIT:
            problems.append(f"metadata credits gives {feature} {amount}, not 1 to {LARGEST_CREDIT}")
        elif feature in grants:
            problems.append(f"metadata credits names {feature} twice")
        else:
            grants[feature] = int(amount)
    if period and period not in CREDIT_PERIODS:
        problems.append(f"metadata credits_period is {period!r}, not period or once")
    if not grants and (period or days_text):
        problems.append("metadata credits_period or credits_expire_days is set without credits")
    days: int | None = None
    if days_text:
        if not days_text.isdigit() or not 1 <= int(days_text) <= LONGEST_CREDIT_DAYS:
            problems.append(
                f"metadata credits_expire_days is {days_text!r}, not a whole number 1 to 3650"
            )
        elif period != "once":
            problems.append("metadata credits_expire_days is set but credits_period is not once")
        else:
            days = int(days_text)
    if not grants:
        return (), None, None
    return tuple(grants.items()), period or "period", days
