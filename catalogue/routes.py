"""GET /api/products/public."""

from __future__ import annotations

from typing import Any, Literal

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from api.deps import container
from api.operations import Answer, ErrorAnswer, documented
from catalogue.store import Product, active_products

bp = Blueprint("products", __name__)


class CreditGrant(Answer):
    feature: str
    amount: int
    # `period`: granted each paid period, unused ones end with it; `once`: a pack's.
    period: Literal["period", "once"]


class PublicProduct(Answer):
    id: str
    name: str
    description: str
    price: float
    priceId: str
    type: str
    billingType: str
    billingInterval: str | None
    isFeatured: bool
    perSeat: bool
    trialDays: int | None
    features: list[str]
    # Each feature (of `features` and `credits`) as a buyer reads it: Stripe's Entitlements
    # feature `name`, else the key.
    featureNames: dict[str, str]
    credits: list[CreditGrant]  # what a purchase grants in credits
    # The price's currency, lower-case ISO 4217 as Stripe gives it (null until the catalogue
    # sync has read it), and whether its amount includes tax: a pricing page says "incl. VAT"
    # for inclusive, "+ tax" for exclusive.
    currency: str | None
    taxBehavior: Literal["inclusive", "exclusive", "unspecified"]


class ProductsAnswer(Answer):
    products: list[PublicProduct]


@bp.get("/api/products/public")
@documented(
    "Active products, featured first",
    {200: ProductsAnswer, 503: ErrorAnswer},
)
def public_products() -> ResponseReturnValue:
    response = jsonify(products=[_public(p) for p in active_products(container().db)])
    response.headers["Cache-Control"] = "public, max-age=60"
    return response


def _public(product: Product) -> dict[str, Any]:
    return {
        "id": product.id,
        "name": product.name,
        "description": product.description,
        "price": float(product.price),
        "priceId": product.stripe_price_id,
        "type": product.type,
        "billingType": product.billing_type,
        "billingInterval": product.billing_interval,
        "isFeatured": product.is_featured,
        # What a pricing page says of the price: sold per seat (a team picks a quantity), the
        # free trial a checkout of it starts with, the features holding it grants.
        "perSeat": product.per_seat,
        "trialDays": product.trial_days,
        "features": list(product.features),
        # How a buyer reads each feature it grants or gives credits of: Stripe's Entitlements
        # feature `name`, else the key.
        "featureNames": _names(product),
        # What it grants in credits: each paid period (`period`) or once, a pack (`once`).
        "credits": [
            {"feature": feature, "amount": amount, "period": product.credits_period or "period"}
            for feature, amount in sorted((product.credits or {}).items())
        ],
        # Its currency, and whether the amount includes tax ("incl. VAT") or not ("+ tax").
        "currency": product.currency,
        "taxBehavior": product.tax_behavior,
    }


def _names(product: Product) -> dict[str, str]:
    named = product.feature_names or {}
    keys = [*product.features, *sorted(product.credits or {})]
    return {key: named.get(key) or key for key in dict.fromkeys(keys)}
