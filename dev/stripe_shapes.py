"""Stripe's objects, whole: every field Stripe's API returns for the types the local Stripe
stand-in serves (dev/stripe_stand_in.py), with the values a new test-mode object has, so what
reads them here reads what it would read from Stripe (tests/dev/test_stripe_shapes.py holds
the fields to Stripe's published fixtures)."""

from __future__ import annotations

from typing import Any

DAY = 24 * 3600
PERIOD = 30 * DAY  # a month, as the stand-in bills one

ADDRESS: dict[str, Any] = {
    "city": None,
    "country": None,
    "line1": None,
    "line2": None,
    "postal_code": None,
    "state": None,
}


def merged(base: Any, over: Any) -> Any:
    """`over` laid on `base`: objects key by key, lists of as many objects item by item (a
    partial object's values over a whole one's)."""
    if isinstance(base, dict) and isinstance(over, dict):
        return base | {k: merged(base.get(k), v) for k, v in over.items()}
    if isinstance(base, list) and isinstance(over, list) and len(base) == len(over):
        return [merged(b, o) for b, o in zip(base, over, strict=True)]
    return over


def listed(data: list[dict[str, Any]], url: str, *, has_more: bool = False) -> dict[str, Any]:
    """A `list` object, as Stripe pages one."""
    return {"object": "list", "data": data, "has_more": has_more, "url": url}


def product(
    product_id: str,
    name: str,
    description: str | None,
    metadata: dict[str, str],
    *,
    created: int,
    active: bool = True,
) -> dict[str, Any]:
    return {
        "id": product_id,
        "object": "product",
        "active": active,
        "created": created,
        "default_price": None,
        "description": description or None,
        "images": [],
        "livemode": False,
        "marketing_features": [],
        "metadata": metadata,
        "name": name,
        "package_dimensions": None,
        "shippable": None,
        "statement_descriptor": None,
        "tax_code": None,
        "type": "service",
        "unit_label": None,
        "updated": created,
        "url": None,
    }


def price(
    price_id: str,
    product_id: str,
    unit_amount: int,
    interval: str | None = None,
    *,
    created: int,
    currency: str = "usd",
    nickname: str | None = None,
) -> dict[str, Any]:
    """A price per unit, one-time or recurring every `interval`."""
    recurring = (
        {
            "interval": interval,
            "interval_count": 1,
            "meter": None,
            "trial_period_days": None,
            "usage_type": "licensed",
        }
        if interval
        else None
    )
    return {
        "id": price_id,
        "object": "price",
        "active": True,
        "billing_scheme": "per_unit",
        "created": created,
        "currency": currency,
        "custom_unit_amount": None,
        "livemode": False,
        "lookup_key": None,
        "metadata": {},
        "nickname": nickname,
        "product": product_id,
        "recurring": recurring,
        "tax_behavior": "unspecified",
        "tiers_mode": None,
        "transform_quantity": None,
        "type": "recurring" if interval else "one_time",
        "unit_amount": unit_amount,
        "unit_amount_decimal": str(unit_amount),
    }


def product_feature(lookup_key: str, name: str) -> dict[str, Any]:
    """A Stripe Entitlements feature attached to a product."""
    return {
        "id": f"prodft_local_{lookup_key}",
        "object": "product_feature",
        "livemode": False,
        "entitlement_feature": {
            "id": f"feat_local_{lookup_key}",
            "object": "entitlements.feature",
            "active": True,
            "livemode": False,
            "lookup_key": lookup_key,
            "metadata": {},
            "name": name,
        },
    }


def customer(
    customer_id: str, *, email: str | None, name: str | None, created: int
) -> dict[str, Any]:
    return {
        "id": customer_id,
        "object": "customer",
        "address": None,
        "balance": 0,
        "created": created,
        "currency": None,
        "default_source": None,
        "delinquent": False,
        "description": None,
        "discount": None,
        "email": email,
        "invoice_prefix": customer_id.removeprefix("cus_")[-8:].upper(),
        "invoice_settings": {
            "custom_fields": None,
            "default_payment_method": None,
            "footer": None,
            "rendering_options": None,
        },
        "livemode": False,
        "metadata": {},
        "name": name,
        "next_invoice_sequence": 1,
        "phone": None,
        "preferred_locales": [],
        "shipping": None,
        "tax_exempt": "none",
        "test_clock": None,
    }


def checkout_session(
    session_id: str,
    *,
    mode: str,
    url: str,
    created: int,
    params: dict[str, Any],
) -> dict[str, Any]:
    """An open session as `checkout.sessions.create` answers it, from its parameters."""
    recovery = (params.get("after_expiration") or {}).get("recovery") or {}
    consent = params.get("consent_collection") or {}
    return {
        "id": session_id,
        "object": "checkout.session",
        # Unset, Stripe follows the dashboard's setting; the stand-in's dashboard has it off.
        "adaptive_pricing": {
            "enabled": _flag((params.get("adaptive_pricing") or {}).get("enabled"))
        },
        "after_expiration": (
            {
                "recovery": {
                    "allow_promotion_codes": _flag(recovery.get("allow_promotion_codes")),
                    "enabled": True,
                    "expires_at": None,
                    "url": None,
                }
            }
            if _flag(recovery.get("enabled"))
            else None
        ),
        "allow_promotion_codes": _flag(params.get("allow_promotion_codes")) or None,
        "amount_subtotal": None,
        "amount_total": None,
        "automatic_tax": {"enabled": False, "liability": None, "provider": None, "status": None},
        "billing_address_collection": params.get("billing_address_collection"),
        "cancel_url": params.get("cancel_url"),
        "client_reference_id": params.get("client_reference_id"),
        "client_secret": None,
        "collected_information": None,
        "consent": None,
        "consent_collection": (
            {
                "payment_method_reuse_agreement": None,
                "promotions": consent.get("promotions"),
                "terms_of_service": consent.get("terms_of_service"),
            }
            if consent
            else None
        ),
        "created": created,
        "currency": None,
        "currency_conversion": None,
        "custom_fields": [],
        "custom_text": {
            "after_submit": None,
            "shipping_address": None,
            "submit": None,
            "terms_of_service_acceptance": None,
        },
        "customer": params.get("customer"),
        "customer_account": None,
        "customer_creation": params.get("customer_creation")
        or ("if_required" if mode == "payment" and not params.get("customer") else None),
        "customer_details": None,
        "customer_email": params.get("customer_email"),
        "discounts": [
            {"coupon": d.get("coupon"), "promotion_code": d.get("promotion_code")}
            for d in params.get("discounts") or []
        ],
        "expires_at": created + DAY,
        "integration_identifier": None,
        "invoice": None,
        "invoice_creation": (
            {
                "enabled": False,
                "invoice_data": {
                    "account_tax_ids": None,
                    "custom_fields": None,
                    "description": None,
                    "footer": None,
                    "issuer": None,
                    "metadata": {},
                    "rendering_options": None,
                },
            }
            if mode == "payment"
            else None
        ),
        "livemode": False,
        "locale": params.get("locale"),
        "managed_payments": {
            "enabled": _flag((params.get("managed_payments") or {}).get("enabled"))
        },
        "metadata": params.get("metadata") or {},
        "mode": mode,
        "origin_context": None,
        "payment_intent": None,
        "payment_link": None,
        "payment_method_collection": (
            params.get("payment_method_collection", "always") if mode == "subscription" else None
        ),
        "payment_method_configuration_details": None,
        "payment_method_options": {},
        "payment_method_types": ["card"],
        "payment_status": "unpaid",
        "permissions": None,
        "phone_number_collection": {"enabled": False},
        "recovered_from": None,
        "saved_payment_method_options": None,
        "setup_intent": None,
        "shipping_address_collection": None,
        "shipping_cost": None,
        "shipping_options": [],
        "status": "open",
        "submit_type": None,
        "subscription": None,
        "success_url": params.get("success_url"),
        "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0},
        "ui_mode": "hosted_page",
        "url": url,
        "wallet_options": None,
    }


def customer_details(email: str, name: str | None) -> dict[str, Any]:
    """What the buyer typed on the checkout page."""
    return {
        "address": dict(ADDRESS),
        "business_name": None,
        "email": email,
        "individual_name": None,
        "name": name,
        "phone": None,
        "tax_exempt": "none",
        "tax_ids": [],
    }


def line_item(
    item_id: str, found: dict[str, Any], quantity: int, adjustable: Any
) -> dict[str, Any]:
    """A checkout session's line item (`item`), its price whole."""
    amount = (found.get("unit_amount") or 0) * quantity
    return {
        "id": item_id,
        "object": "item",
        "adjustable_quantity": adjustable,
        "amount_discount": 0,
        "amount_subtotal": amount,
        "amount_tax": 0,
        "amount_total": amount,
        "currency": found.get("currency") or "usd",
        "description": found.get("nickname") or found.get("product"),
        "metadata": {},
        "price": found,
        "quantity": quantity,
    }


def subscription(
    subscription_id: str,
    *,
    customer_id: str,
    items: list[dict[str, Any]],
    created: int,
    status: str = "active",
    metadata: dict[str, str] | None = None,
    trial_days: int | None = None,
    trial_end_behavior: str = "create_invoice",
) -> dict[str, Any]:
    """A subscription started at `created` (on trial for `trial_days`), items whole."""
    trial_end = created + trial_days * DAY if trial_days else None
    currency = items[0]["price"].get("currency", "usd") if items else "usd"
    return {
        "id": subscription_id,
        "object": "subscription",
        "application": None,
        "application_fee_percent": None,
        "automatic_tax": {"disabled_reason": None, "enabled": False, "liability": None},
        "billing_cycle_anchor": trial_end or created,
        "billing_cycle_anchor_config": None,
        "billing_mode": {"flexible": None, "type": "classic"},
        "billing_schedules": [],
        "billing_thresholds": None,
        "cancel_at": None,
        "cancel_at_period_end": False,
        "canceled_at": None,
        "cancellation_details": {"comment": None, "feedback": None, "reason": None},
        "collection_method": "charge_automatically",
        "created": created,
        "currency": currency,
        "customer": customer_id,
        "customer_account": None,
        "days_until_due": None,
        "default_payment_method": None,
        "default_source": None,
        "default_tax_rates": [],
        "description": None,
        "discounts": [],
        "ended_at": None,
        "invoice_settings": {
            "account_tax_ids": None,
            "custom_fields": None,
            "description": None,
            "footer": None,
            "issuer": {"type": "self"},
        },
        "items": listed(items, f"/v1/subscription_items?subscription={subscription_id}"),
        "latest_invoice": None,
        "livemode": False,
        "managed_payments": {"enabled": False},
        "metadata": metadata or {},
        "next_pending_invoice_item_invoice": None,
        "on_behalf_of": None,
        "pause_collection": None,
        "payment_settings": {
            "payment_method_options": None,
            "payment_method_types": None,
            "save_default_payment_method": "off",
        },
        "pending_invoice_item_interval": None,
        "pending_setup_intent": None,
        "pending_update": None,
        "schedule": None,
        "start_date": created,
        "status": "trialing" if trial_days else status,
        "test_clock": None,
        "transfer_data": None,
        "trial_end": trial_end,
        "trial_settings": {"end_behavior": {"missing_payment_method": trial_end_behavior}},
        "trial_start": created if trial_days else None,
    }


def subscription_item(
    item_id: str, subscription_id: str, found: dict[str, Any], quantity: int, *, created: int
) -> dict[str, Any]:
    """An item of a subscription, billed from `created` for one period of its price."""
    return {
        "id": item_id,
        "object": "subscription_item",
        "billing_thresholds": None,
        "created": created,
        "current_period_end": created + PERIOD,
        "current_period_start": created,
        "discounts": [],
        "metadata": {},
        "plan": plan_of(found),
        "price": found,
        "quantity": quantity,
        "subscription": subscription_id,
        "tax_rates": [],
    }


def plan_of(found: dict[str, Any]) -> dict[str, Any]:
    """The legacy `plan` Stripe still shows on a subscription item, from its price."""
    recurring = found.get("recurring") or {}
    return {
        "id": found["id"],
        "object": "plan",
        "active": found.get("active", True),
        "amount": found.get("unit_amount"),
        "amount_decimal": found.get("unit_amount_decimal"),
        "billing_scheme": found.get("billing_scheme", "per_unit"),
        "created": found.get("created"),
        "currency": found.get("currency", "usd"),
        "interval": recurring.get("interval", "month"),
        "interval_count": recurring.get("interval_count", 1),
        "livemode": False,
        "metadata": {},
        "meter": None,
        "nickname": found.get("nickname"),
        "product": found.get("product"),
        "tiers_mode": None,
        "transform_usage": None,
        "trial_period_days": None,
        "usage_type": recurring.get("usage_type", "licensed"),
    }


def portal_session(
    session_id: str, *, customer_id: str, return_url: str | None, url: str, created: int
) -> dict[str, Any]:
    return {
        "id": session_id,
        "object": "billing_portal.session",
        "configuration": "bpc_local_default",
        "created": created,
        "customer": customer_id,
        "customer_account": None,
        "flow": None,
        "livemode": False,
        "locale": None,
        "on_behalf_of": None,
        "return_url": return_url,
        "url": url,
    }


def event(
    event_id: str,
    event_type: str,
    obj: dict[str, Any],
    *,
    created: int,
    api_version: str,
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"object": obj}
    if previous is not None:
        data["previous_attributes"] = previous
    return {
        "id": event_id,
        "object": "event",
        "api_version": api_version,
        "created": created,
        "data": data,
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }


def error(message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """An `invalid_request_error`, as Stripe answers a refused request."""
    found: dict[str, Any] = {"type": "invalid_request_error", "message": message}
    if param is not None:
        found["param"] = param
    if code is not None:
        found["code"] = code
    return {"error": found}


# What Stripe says of a card it refused, by the error's code (its test cards' messages).
CARD_REFUSALS = {
    "card_declined": ("Your card was declined.", "generic_decline"),
    "authentication_required": (
        "Your card was declined. This transaction requires authentication.",
        "authentication_required",
    ),
}


def card_error(code: str, *, payment_method: str | None) -> dict[str, Any]:
    """A `card_error` as a refused charge carries it (the intent's `last_payment_error`)."""
    message, decline = CARD_REFUSALS[code]
    return {
        "type": "card_error",
        "code": code,
        "decline_code": decline,
        "message": message,
        "doc_url": f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}",
        "payment_method_type": "card" if payment_method else None,
    }


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def meter(
    meter_id: str, *, display_name: str, event_name: str, formula: str = "sum", created: int
) -> dict[str, Any]:
    """A `billing.meter`, as `POST /v1/billing/meters` answers it (its payload keys the
    defaults: `stripe_customer_id` and `value`)."""
    return {
        "id": meter_id,
        "object": "billing.meter",
        "created": created,
        "customer_mapping": {"type": "by_id", "event_payload_key": "stripe_customer_id"},
        "default_aggregation": {"formula": formula},
        "display_name": display_name,
        "event_name": event_name,
        "event_time_window": None,
        "livemode": False,
        "status": "active",
        "status_transitions": {"deactivated_at": None},
        "updated": created,
        "value_settings": {"event_payload_key": "value"},
    }


def meter_event(
    *, event_name: str, identifier: str, payload: dict[str, str], timestamp: int, created: int
) -> dict[str, Any]:
    """A `billing.meter_event`, as `POST /v1/billing/meter_events` answers it."""
    return {
        "object": "billing.meter_event",
        "created": created,
        "event_name": event_name,
        "identifier": identifier,
        "livemode": False,
        "payload": payload,
        "timestamp": timestamp,
    }


def invoice_line(
    line_id: str,
    *,
    invoice_id: str,
    subscription_id: str | None,
    subscription_item: str | None,
    price_id: str,
    product_id: str,
    amount: int,
    currency: str,
    quantity: int,
    start: int,
    end: int,
) -> dict[str, Any]:
    """An invoice's line (`line_item`) billing a subscription item for one period."""
    return {
        "id": line_id,
        "object": "line_item",
        "amount": amount,
        "currency": currency,
        "description": None,
        "discount_amounts": [],
        "discountable": True,
        "discounts": [],
        "invoice": invoice_id,
        "livemode": False,
        "metadata": {},
        "parent": (
            {
                "invoice_item_details": None,
                "subscription_item_details": {
                    "invoice_item": None,
                    "proration": False,
                    "proration_details": {"credited_items": None},
                    "subscription": subscription_id,
                    "subscription_item": subscription_item,
                },
                "type": "subscription_item_details",
            }
            if subscription_id
            else None
        ),
        "period": {"end": end, "start": start},
        "pretax_credit_amounts": [],
        "pricing": {
            "price_details": {"price": price_id, "product": product_id},
            "type": "price_details",
            "unit_amount_decimal": str(amount // quantity if quantity else amount),
        },
        "quantity": quantity,
        "quantity_decimal": str(quantity),
        "subscription": subscription_id,
        "subtotal": amount,
        "taxes": [],
    }


def invoice(
    invoice_id: str,
    *,
    customer_id: str,
    subscription_id: str | None,
    lines: list[dict[str, Any]],
    created: int,
    currency: str,
    paid: bool,
    tax: int = 0,
) -> dict[str, Any]:
    """A finalized invoice of a subscription's period, paid or still open; `tax` on top of its
    lines' amounts."""
    subtotal = sum(line["amount"] for line in lines)
    total = subtotal + tax
    start = lines[0]["period"]["start"] if lines else created
    end = lines[0]["period"]["end"] if lines else created
    return {
        "id": invoice_id,
        "object": "invoice",
        "account_country": "US",
        "account_name": None,
        "account_tax_ids": None,
        "amount_due": total,
        "amount_overpaid": 0,
        "amount_paid": total if paid else 0,
        "amount_remaining": 0 if paid else total,
        "amount_shipping": 0,
        "application": None,
        "attempt_count": 1,
        "attempted": True,
        "auto_advance": not paid,
        "automatic_tax": {
            "disabled_reason": None,
            "enabled": bool(tax),
            "liability": {"type": "self"} if tax else None,
            "provider": "stripe" if tax else None,
            "status": "complete" if tax else None,
        },
        "automatically_finalizes_at": None,
        "billing_reason": "subscription_cycle",
        "collection_method": "charge_automatically",
        "created": created,
        "currency": currency,
        "custom_fields": None,
        "customer": customer_id,
        "customer_account": None,
        "customer_address": None,
        "customer_email": None,
        "customer_name": None,
        "customer_phone": None,
        "customer_shipping": None,
        "customer_tax_exempt": "none",
        "customer_tax_ids": [],
        "default_payment_method": None,
        "default_source": None,
        "default_tax_rates": [],
        "description": None,
        "discounts": [],
        "due_date": None,
        "effective_at": created,
        "ending_balance": 0,
        "footer": None,
        "from_invoice": None,
        "hosted_invoice_url": None,
        "invoice_pdf": None,
        "issuer": {"type": "self"},
        "last_finalization_error": None,
        "latest_revision": None,
        "lines": listed(lines, f"/v1/invoices/{invoice_id}/lines"),
        "livemode": False,
        "metadata": {},
        "next_payment_attempt": None,
        "number": None,
        "on_behalf_of": None,
        "parent": (
            {
                "quote_details": None,
                "subscription_details": {"metadata": {}, "subscription": subscription_id},
                "type": "subscription_details",
            }
            if subscription_id
            else None
        ),
        "payment_settings": {
            "default_mandate": None,
            "payment_method_options": None,
            "payment_method_types": None,
        },
        "period_end": end,
        "period_start": start,
        "post_payment_credit_notes_amount": 0,
        "pre_payment_credit_notes_amount": 0,
        "receipt_number": None,
        "rendering": None,
        "shipping_cost": None,
        "shipping_details": None,
        "starting_balance": 0,
        "statement_descriptor": None,
        "status": "paid" if paid else "open",
        "status_transitions": {
            "finalized_at": created,
            "marked_uncollectible_at": None,
            "paid_at": created if paid else None,
            "voided_at": None,
        },
        "subtotal": subtotal,
        "subtotal_excluding_tax": subtotal,
        "test_clock": None,
        "total": total,
        "total_discount_amounts": [],
        "total_excluding_tax": subtotal,
        "total_pretax_credit_amounts": [],
        "total_taxes": [],
        "webhooks_delivered_at": created,
    }


def charge(
    charge_id: str,
    *,
    amount: int,
    currency: str,
    customer_id: str | None,
    payment_intent: str | None,
    created: int,
    receipt_url: str | None,
    refunded: int = 0,
) -> dict[str, Any]:
    """A card charge that succeeded (`refunded`: how much of it has been given back)."""
    return {
        "id": charge_id,
        "object": "charge",
        "amount": amount,
        "amount_captured": amount,
        "amount_refunded": refunded,
        "application": None,
        "application_fee": None,
        "application_fee_amount": None,
        "balance_transaction": None,
        "billing_details": {
            "address": dict(ADDRESS),
            "email": None,
            "name": None,
            "phone": None,
            "tax_id": None,
        },
        "calculated_statement_descriptor": None,
        "captured": True,
        "created": created,
        "currency": currency,
        "customer": customer_id,
        "description": None,
        "disputed": False,
        "failure_balance_transaction": None,
        "failure_code": None,
        "failure_message": None,
        "fraud_details": {},
        "livemode": False,
        "metadata": {},
        "on_behalf_of": None,
        "outcome": {
            "advice_code": None,
            "network_advice_code": None,
            "network_decline_code": None,
            "network_status": "approved_by_network",
            "reason": None,
            "risk_level": "normal",
            "seller_message": "Payment complete.",
            "type": "authorized",
        },
        "paid": True,
        "payment_intent": payment_intent,
        "payment_method": None,
        "payment_method_details": None,
        "receipt_email": None,
        "receipt_number": None,
        "receipt_url": receipt_url,
        "refunded": refunded >= amount > 0,
        "refunds": listed([], f"/v1/charges/{charge_id}/refunds"),
        "review": None,
        "shipping": None,
        "source": None,
        "source_transfer": None,
        "statement_descriptor": None,
        "statement_descriptor_suffix": None,
        "status": "succeeded",
        "transfer_data": None,
        "transfer_group": None,
    }


def payment_intent(
    intent_id: str,
    *,
    amount: int,
    currency: str,
    customer_id: str | None,
    latest_charge: str | dict[str, Any] | None,
    created: int,
) -> dict[str, Any]:
    """A payment intent that succeeded, its latest charge an id or (expanded) whole."""
    return {
        "id": intent_id,
        "object": "payment_intent",
        "amount": amount,
        "amount_capturable": 0,
        "amount_details": {"tip": {}},
        "amount_received": amount,
        "application": None,
        "application_fee_amount": None,
        "automatic_payment_methods": None,
        "canceled_at": None,
        "cancellation_reason": None,
        "capture_method": "automatic",
        "client_secret": None,
        "confirmation_method": "automatic",
        "created": created,
        "currency": currency,
        "customer": customer_id,
        "customer_account": None,
        "description": None,
        "excluded_payment_method_types": None,
        "last_payment_error": None,
        "latest_charge": latest_charge,
        "livemode": False,
        "managed_payments": {"enabled": False},
        "metadata": {},
        "next_action": None,
        "on_behalf_of": None,
        "payment_method": None,
        "payment_method_configuration_details": None,
        "payment_method_options": {},
        "payment_method_types": ["card"],
        "processing": None,
        "receipt_email": None,
        "review": None,
        "setup_future_usage": None,
        "shipping": None,
        "source": None,
        "statement_descriptor": None,
        "statement_descriptor_suffix": None,
        "status": "succeeded",
        "transfer_data": None,
        "transfer_group": None,
    }


def dispute(
    dispute_id: str,
    *,
    amount: int,
    currency: str,
    charge_id: str,
    payment_intent: str | None,
    created: int,
    due_by: int,
    reason: str,
    status: str,
) -> dict[str, Any]:
    """A dispute the card holder's bank opened on a charge, evidence not yet given."""
    evidence_fields = [
        "access_activity_log",
        "billing_address",
        "cancellation_policy",
        "cancellation_policy_disclosure",
        "cancellation_rebuttal",
        "customer_communication",
        "customer_email_address",
        "customer_name",
        "customer_purchase_ip",
        "customer_signature",
        "duplicate_charge_documentation",
        "duplicate_charge_explanation",
        "duplicate_charge_id",
        "product_description",
        "receipt",
        "refund_policy",
        "refund_policy_disclosure",
        "refund_refusal_explanation",
        "service_date",
        "service_documentation",
        "shipping_address",
        "shipping_carrier",
        "shipping_date",
        "shipping_documentation",
        "shipping_tracking_number",
        "uncategorized_file",
        "uncategorized_text",
    ]
    return {
        "id": dispute_id,
        "object": "dispute",
        "amount": amount,
        "balance_transactions": [],
        "charge": charge_id,
        "created": created,
        "currency": currency,
        "enhanced_eligibility_types": [],
        "evidence": dict.fromkeys(evidence_fields) | {"enhanced_evidence": {}},
        "evidence_details": {
            "due_by": due_by,
            "enhanced_eligibility": {},
            "has_evidence": False,
            "past_due": False,
            "submission_count": 0,
        },
        "is_charge_refundable": False,
        "livemode": False,
        "metadata": {},
        "payment_intent": payment_intent,
        "payment_method_details": {
            "card": {
                "brand": "visa",
                "case_type": "chargeback",
                "network": "visa",
                "network_reason_code": "10.4",
            },
            "type": "card",
        },
        "reason": reason,
        "status": status,
    }
