"""The Stripe stand-in's plan changes: prorations, invoice previews, subscription schedules,
coupons and discounts, and the end of a period, as Stripe computes and sends them.

Prorations are seconds-based as Stripe's are: a changed item's unused time on its old price is
credited and its remaining time on the new price charged, each in proportion to the seconds left
in the period over the period's length (an interval change starts a new period now, charged
whole). `always_invoice` bills them at once on an invoice of `billing_reason`
`subscription_update`, paid unless `decline_payments` is set; with `payment_behavior`
`pending_if_incomplete` a refused payment leaves the subscription as it was, with a
`pending_update`. A schedule made `from_subscription` holds the current phase; its phases are
replaced by an update, and it lets go of the subscription on release. `end_period` brings a
subscription to its period's end, as time passing would: a scheduled phase starts, a
cancellation at the period's end ends it, and the renewal is invoiced and paid, each with the
events Stripe sends.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from datetime import UTC, datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from dev import stripe_shapes as shapes

DAY = 86_400
# A period's length by its price's interval, as the stand-in bills one.
INTERVAL_SECONDS = {"day": DAY, "week": 7 * DAY, "month": 30 * DAY, "year": 365 * DAY}
# Stripe's `cancellation_details.feedback` values.
FEEDBACK = (
    "customer_service",
    "low_quality",
    "missing_features",
    "other",
    "switched_service",
    "too_complex",
    "too_expensive",
    "unused",
)


def period_seconds(price: dict[str, Any]) -> int:
    recurring = price.get("recurring") or {}
    count = int(recurring.get("interval_count") or 1)
    return INTERVAL_SECONDS.get(str(recurring.get("interval") or "month"), 30 * DAY) * count


def _interval(price: dict[str, Any]) -> tuple[str, int]:
    recurring = price.get("recurring") or {}
    return str(recurring.get("interval") or "month"), int(recurring.get("interval_count") or 1)


def prorated(amount: int, *, left: int, length: int) -> int:
    """`amount` for `left` seconds of a `length`-second period, rounded as Stripe rounds."""
    if length <= 0 or left <= 0:
        return 0
    return int((amount * left + length // 2) // length)


def _day(at: int) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%d %b %Y")


class PlanChanges:
    """Mixed into StripeStandIn: what it holds for plan changes and the routes that make them."""

    lock: threading.RLock
    url: str
    subscriptions: dict[str, dict[str, Any]]
    invoices: dict[str, dict[str, Any]]
    products: dict[str, dict[str, Any]]
    customers: dict[str, dict[str, Any]]
    events: list[dict[str, Any]]

    def _plan_changes_init(self) -> None:
        self.schedules: dict[str, dict[str, Any]] = {}
        self.coupons: dict[str, dict[str, Any]] = {}
        self.discount_objects: dict[str, dict[str, Any]] = {}
        # What Stripe keeps beside a subscription: prorations billed with its next invoice,
        # and the coupon its discount is of.
        self.pending_prorations: dict[str, list[dict[str, Any]]] = {}
        self.subscription_coupons: dict[str, str] = {}
        # While set, every payment of a plan change is refused (a card declined).
        self.decline_payments = False

    def _plan_changes_reset(self) -> None:
        self.schedules.clear()
        self.coupons.clear()
        self.discount_objects.clear()
        self.pending_prorations.clear()
        self.subscription_coupons.clear()
        self.decline_payments = False

    # What StripeStandIn provides.

    def _price_or_stub(self, price_id: str, *, recurring: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _save(self) -> None:
        raise NotImplementedError

    def _send_later(
        self,
        event_type: str,
        obj: dict[str, Any],
        previous: dict[str, Any] | None,
        *,
        created: int | None = None,
    ) -> None:
        raise NotImplementedError

    # Prorations.

    def _name(self, price: dict[str, Any], quantity: int) -> str:
        product = self.products.get(str(price.get("product")), {})
        name = str(product.get("name") or price.get("nickname") or price["id"])
        return f"{quantity} × {name}" if quantity != 1 else name  # noqa: RUF001 - as Stripe writes it

    def proration_lines(
        self,
        sub: dict[str, Any],
        changes: dict[str, tuple[dict[str, Any], int]],
        at: int,
        *,
        invoice_id: str,
    ) -> list[dict[str, Any]]:
        """The proration lines of changing items (`changes`: item id -> new price and quantity)
        at `at`: nothing on a trial (nothing is charged until it ends)."""
        if sub["status"] == "trialing":
            return []
        lines: list[dict[str, Any]] = []
        for item in sub["items"]["data"]:
            if item["id"] not in changes:
                continue
            new_price, new_quantity = changes[item["id"]]
            old_price, old_quantity = item["price"], int(item["quantity"] or 1)
            if new_price["id"] == old_price["id"] and new_quantity == old_quantity:
                continue
            start, end = int(item["current_period_start"]), int(item["current_period_end"])
            at = min(max(at, start), end)
            length, left = end - start, end - at
            old_amount = int(old_price.get("unit_amount") or 0) * old_quantity
            new_amount = int(new_price.get("unit_amount") or 0) * new_quantity
            credit = -prorated(old_amount, left=left, length=length)
            new_period = _interval(new_price) != _interval(old_price)
            if new_period:  # a new billing period starts now: charged whole
                charge, charge_end = new_amount, at + period_seconds(new_price)
            else:
                charge, charge_end = prorated(new_amount, left=left, length=length), end
            lines.append(
                self._line(
                    invoice_id,
                    sub,
                    item["id"],
                    old_price,
                    old_quantity,
                    credit,
                    (at, end),
                    f"Unused time on {self._name(old_price, old_quantity)} after {_day(at)}",
                )
            )
            lines.append(
                self._line(
                    invoice_id,
                    sub,
                    item["id"],
                    new_price,
                    new_quantity,
                    charge,
                    (at, charge_end),
                    f"Remaining time on {self._name(new_price, new_quantity)} after {_day(at)}",
                )
            )
        return lines

    def _line(
        self,
        invoice_id: str,
        sub: dict[str, Any],
        item_id: str,
        price: dict[str, Any],
        quantity: int,
        amount: int,
        period: tuple[int, int],
        description: str | None,
        *,
        proration: bool = True,
    ) -> dict[str, Any]:
        line = shapes.invoice_line(
            f"il_local_{secrets.token_hex(8)}",
            invoice_id=invoice_id,
            subscription_id=sub["id"],
            subscription_item=item_id,
            price_id=price["id"],
            product_id=str(price.get("product")),
            amount=amount,
            currency=str(price.get("currency") or sub["currency"]),
            quantity=quantity,
            start=period[0],
            end=period[1],
        )
        line["description"] = description
        line["parent"]["subscription_item_details"]["proration"] = proration
        return line

    def _period_lines(
        self, invoice_id: str, sub: dict[str, Any], items: list[dict[str, Any]], start: int
    ) -> list[dict[str, Any]]:
        """A period's lines for `items` (each a price and quantity) from `start`."""
        return [
            self._line(
                invoice_id,
                sub,
                str(item.get("id") or ""),
                item["price"],
                int(item["quantity"] or 1),
                int(item["price"].get("unit_amount") or 0) * int(item["quantity"] or 1),
                (start, start + period_seconds(item["price"])),
                f"{self._name(item['price'], int(item['quantity'] or 1))}"
                f" ({_day(start)} - {_day(start + period_seconds(item['price']))})",
                proration=False,
            )
            for item in items
        ]

    def _invoice(
        self,
        invoice_id: str,
        sub: dict[str, Any],
        lines: list[dict[str, Any]],
        *,
        created: int,
        paid: bool,
        reason: str,
    ) -> dict[str, Any]:
        made = shapes.invoice(
            invoice_id,
            customer_id=str(sub["customer"]),
            subscription_id=sub["id"],
            lines=lines,
            created=created,
            currency=str(sub["currency"]),
            paid=paid,
        )
        discount = self._discount_amount(sub, made["subtotal"])
        if discount:
            made["total"] = made["total_excluding_tax"] = made["subtotal"] - discount
            made["amount_due"] = made["total"]
            made["amount_paid"] = made["total"] if paid else 0
            made["amount_remaining"] = 0 if paid else made["total"]
            made["total_discount_amounts"] = [{"amount": discount, "discount": sub["discounts"][0]}]
            made["discounts"] = list(sub["discounts"])
        made["billing_reason"] = reason
        made["hosted_invoice_url"] = f"{self.url}/invoice/{invoice_id}"
        if lines:
            made["period_start"] = min(line["period"]["start"] for line in lines)
            made["period_end"] = max(line["period"]["end"] for line in lines)
        return made

    def _discount_amount(self, sub: dict[str, Any], subtotal: int) -> int:
        """What the subscription's (first) discount takes off a positive subtotal."""
        if subtotal <= 0 or not sub.get("discounts"):
            return 0
        coupon = self.coupons.get(self.subscription_coupons.get(sub["id"], ""))
        if coupon is None:
            return 0
        if coupon.get("percent_off"):
            return int(subtotal * float(coupon["percent_off"]) / 100 + 0.5)
        return min(subtotal, int(coupon.get("amount_off") or 0))

    # The items a request names.

    def _changes(
        self, sub: dict[str, Any], items: list[dict[str, Any]], param: str
    ) -> dict[str, tuple[dict[str, Any], int]]:
        from dev.stripe_stand_in import _int, _no_such

        held = {item["id"]: item for item in sub["items"]["data"]}
        changes: dict[str, tuple[dict[str, Any], int]] = {}
        for n, change in enumerate(items):
            item = held.get(str(change.get("id")))
            if item is None:
                raise _no_such(
                    "subscription_item", str(change.get("id")), param=f"{param}[{n}][id]"
                )
            price = item["price"]
            if change.get("price"):
                price = self._price_or_stub(str(change["price"]), recurring=True)
            quantity = int(item["quantity"] or 1)
            if "quantity" in change:
                quantity = _int(change["quantity"], f"{param}[{n}][quantity]")
            changes[item["id"]] = (price, quantity)
        return changes

    def _proration_date(self, sub: dict[str, Any], value: Any, param: str) -> int:
        from dev.stripe_stand_in import _int, _refused

        if value is None:
            return int(time.time())
        at = _int(value, param)
        item = sub["items"]["data"][0]
        if not item["current_period_start"] <= at <= item["current_period_end"]:
            raise _refused(
                "The proration date must be within the current subscription period.", param=param
            )
        return at

    # POST /v1/invoices/create_preview

    def create_preview(self, request: Request) -> Response:
        from dev.stripe_stand_in import _json, _no_such, _params, _refused

        params = _params(request)
        sid = str(params.get("subscription") or "")
        details = params.get("subscription_details") or {}
        behavior = details.get("proration_behavior") or "create_prorations"
        if details.get("proration_date") is not None and behavior == "none":
            raise _refused(
                "subscription_details.proration_behavior cannot be 'none' with a proration_date.",
                param="subscription_details[proration_behavior]",
            )
        with self.lock:
            sub = self.subscriptions.get(sid)
            if sub is None:
                raise _no_such("subscription", sid, param="subscription")
            changes = self._changes(sub, details.get("items") or [], "subscription_details[items]")
            at = self._proration_date(
                sub, details.get("proration_date"), "subscription_details[proration_date]"
            )
            invoice_id = f"upcoming_in_local_{secrets.token_hex(10)}"
            lines = (
                []
                if behavior == "none"
                else self.proration_lines(sub, changes, at, invoice_id=invoice_id)
            )
            created = at
            if behavior != "always_invoice":
                # The next period's invoice, on the items as they would then be.
                after = [
                    {"id": i["id"], "price": changes.get(i["id"], (i["price"], 0))[0],
                     "quantity": changes.get(i["id"], (None, i["quantity"]))[1]}
                    for i in sub["items"]["data"]
                ]  # fmt: skip
                start = int(sub["items"]["data"][0]["current_period_end"])
                lines += self._period_lines(invoice_id, sub, after, start)
                created = start
            preview = self._invoice(
                invoice_id, sub, lines, created=created, paid=False, reason="upcoming"
            )
        preview |= {"status": "draft", "hosted_invoice_url": None, "auto_advance": False}
        preview["status_transitions"]["finalized_at"] = None
        preview["attempted"], preview["attempt_count"] = False, 0
        preview["webhooks_delivered_at"] = None
        preview["amount_paid"], preview["amount_remaining"] = 0, preview["amount_due"]
        return _json(preview)

    # A subscription's items changed through `POST /v1/subscriptions/{id}`.

    def change_items(
        self, sub: dict[str, Any], params: dict[str, Any]
    ) -> tuple[list[tuple[str, dict[str, Any], dict[str, Any] | None]], bool]:
        """Apply the items a subscription update names (price, quantity), prorated as asked;
        the events to send after (type, object, previous attributes), and whether anything
        changed. Called under the lock."""
        changes = self._changes(sub, params.get("items") or [], "items")
        if not changes:
            return [], False
        at = self._proration_date(sub, params.get("proration_date"), "proration_date")
        behavior = params.get("proration_behavior") or "create_prorations"
        invoice_id = f"in_local_{secrets.token_hex(12)}"
        lines = (
            self.proration_lines(sub, changes, at, invoice_id=invoice_id)
            if behavior != "none"
            else []
        )
        events: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        if behavior == "always_invoice" and lines:
            paid = not self.decline_payments
            invoice = self._invoice(
                invoice_id, sub, lines, created=at, paid=paid, reason="subscription_update"
            )
            self.invoices[invoice_id] = invoice
            if not paid:
                events.append(("invoice.payment_failed", copy.deepcopy(invoice), None))
                if params.get("payment_behavior") == "pending_if_incomplete":
                    previous = {"pending_update": None, "latest_invoice": sub["latest_invoice"]}
                    sub["latest_invoice"] = invoice_id
                    sub["pending_update"] = {
                        "billing_cycle_anchor": None,
                        "cancel_at_period_end": None,
                        "discount": None,
                        "discounts": None,
                        "expires_at": at + 23 * 3600,
                        "metadata": None,
                        "subscription_items": [
                            self._item_after(item, changes[item["id"]], at)
                            for item in sub["items"]["data"]
                            if item["id"] in changes
                        ],
                        "trial_end": None,
                        "trial_from_plan": None,
                    }
                    events.insert(
                        0, ("customer.subscription.updated", copy.deepcopy(sub), previous)
                    )
                    return events, True
            else:
                events.append(("invoice.paid", copy.deepcopy(invoice), None))
            sub["latest_invoice"] = invoice_id
        elif behavior == "create_prorations" and lines:
            # Billed with the next period's invoice: held as pending invoice items.
            self.pending_prorations.setdefault(sub["id"], []).extend(lines)
        previous = {"items": copy.deepcopy(sub["items"])}
        sub["items"]["data"] = [
            self._item_after(item, changes[item["id"]], at) if item["id"] in changes else item
            for item in sub["items"]["data"]
        ]
        if sub["items"] == previous["items"]:
            return events, bool(events)
        events.insert(0, ("customer.subscription.updated", public(sub), previous))
        return events, True

    def _item_after(
        self, item: dict[str, Any], change: tuple[dict[str, Any], int], at: int
    ) -> dict[str, Any]:
        price, quantity = change
        after = copy.deepcopy(item) | {"price": price, "plan": shapes.plan_of(price)}
        after["quantity"] = quantity
        if _interval(price) != _interval(item["price"]):
            after["current_period_start"] = at
            after["current_period_end"] = at + period_seconds(price)
        return after

    # Subscription schedules.

    def create_schedule(self, request: Request) -> Response:
        from dev.stripe_stand_in import _json, _no_such, _params, _refused

        params = _params(request)
        sid = str(params.get("from_subscription") or "")
        now = int(time.time())
        with self.lock:
            sub = self.subscriptions.get(sid)
            if sub is None:
                raise _no_such("subscription", sid, param="from_subscription")
            if sub.get("schedule"):
                raise _refused(
                    f"You cannot migrate a subscription that is already attached to a schedule:"
                    f" `{sub['schedule']}`.",
                    param="from_subscription",
                )
            schedule_id = f"sub_sched_local_{secrets.token_hex(10)}"
            item = sub["items"]["data"][0]
            phase = self._phase(
                sub,
                [
                    {"price": i["price"]["id"], "quantity": i["quantity"]}
                    for i in sub["items"]["data"]
                ],
                int(item["current_period_start"]),
                int(item["current_period_end"]),
            )
            made = _schedule(schedule_id, sub, [phase], created=now)
            self.schedules[schedule_id] = made
            previous = {"schedule": None}
            sub["schedule"] = schedule_id
            self._save()
            answer, subscription = copy.deepcopy(made), public(sub)
        self._send_later("subscription_schedule.created", copy.deepcopy(answer), None)
        self._send_later("customer.subscription.updated", subscription, previous)
        return _json(answer)

    def _phase(
        self, sub: dict[str, Any], items: list[dict[str, Any]], start: int, end: int | None
    ) -> dict[str, Any]:
        whole = []
        for item in items:
            price = self._price_or_stub(str(item["price"]), recurring=True)
            whole.append(
                {
                    "billing_thresholds": None,
                    "discounts": [],
                    "metadata": {},
                    "plan": price["id"],
                    "price": price["id"],
                    "quantity": int(item.get("quantity") or 1),
                    "tax_rates": [],
                }
            )
        return {
            "add_invoice_items": [],
            "application_fee_percent": None,
            "automatic_tax": None,
            "billing_cycle_anchor": None,
            "billing_thresholds": None,
            "collection_method": None,
            "currency": str(sub["currency"]),
            "default_payment_method": None,
            "default_tax_rates": [],
            "description": None,
            "discounts": [],
            "end_date": end
            if end is not None
            else start
            + period_seconds(self._price_or_stub(str(items[0]["price"]), recurring=True)),
            "invoice_settings": None,
            "items": whole,
            "metadata": {},
            "on_behalf_of": None,
            "proration_behavior": "create_prorations",
            "start_date": start,
            "transfer_data": None,
            "trial_end": None,
        }

    def get_schedule(self, request: Request, schedule_id: str) -> Response:
        from dev.stripe_stand_in import _json, _no_such

        with self.lock:
            found = copy.deepcopy(self.schedules.get(schedule_id))
        if found is None:
            raise _no_such("subscription_schedule", schedule_id)
        return _json(found)

    def update_schedule(self, request: Request, schedule_id: str) -> Response:
        from dev.stripe_stand_in import _int, _json, _no_such, _params, _refused

        params = _params(request)
        with self.lock:
            found = self.schedules.get(schedule_id)
            if found is None:
                raise _no_such("subscription_schedule", schedule_id)
            if found["status"] not in ("not_started", "active"):
                raise _refused(
                    f"You cannot update a subscription schedule that is currently in the"
                    f" `{found['status']}` status.",
                )
            sub = self.subscriptions[str(found["subscription"])]
            previous: dict[str, Any] = {}
            if "phases" in params:
                phases: list[dict[str, Any]] = []
                for n, phase in enumerate(params["phases"]):
                    start = phase.get("start_date")
                    if start in (None, "now"):
                        start = phases[-1]["end_date"] if phases else int(time.time())
                    start = _int(start, f"phases[{n}][start_date]")
                    end = phase.get("end_date")
                    items = phase.get("items") or []
                    if not items:
                        raise _refused(
                            "Missing required param: items.", param=f"phases[{n}][items]"
                        )
                    phases.append(
                        self._phase(
                            sub,
                            items,
                            start,
                            _int(end, f"phases[{n}][end_date]") if end is not None else None,
                        )
                    )
                previous["phases"] = copy.deepcopy(found["phases"])
                found["phases"] = phases
            if params.get("end_behavior"):
                previous["end_behavior"] = found["end_behavior"]
                found["end_behavior"] = str(params["end_behavior"])
            self._save()
            answer = copy.deepcopy(found)
        self._send_later("subscription_schedule.updated", copy.deepcopy(answer), previous)
        return _json(answer)

    def release_schedule(self, request: Request, schedule_id: str) -> Response:
        from dev.stripe_stand_in import _json, _no_such, _refused

        now = int(time.time())
        with self.lock:
            found = self.schedules.get(schedule_id)
            if found is None:
                raise _no_such("subscription_schedule", schedule_id)
            if found["status"] not in ("not_started", "active"):
                raise _refused(
                    f"You cannot release a subscription schedule that is currently in the"
                    f" `{found['status']}` status.",
                )
            sid = str(found["subscription"])
            previous = {"status": found["status"], "released_at": None}
            found |= {
                "status": "released",
                "released_at": now,
                "released_subscription": sid,
                "subscription": None,
                "current_phase": None,
            }
            sub = self.subscriptions[sid]
            sub["schedule"] = None
            self._save()
            answer, subscription = copy.deepcopy(found), public(sub)
        self._send_later("subscription_schedule.released", copy.deepcopy(answer), None)
        self._send_later("customer.subscription.updated", subscription, {"schedule": schedule_id})
        del previous
        return _json(answer)

    # Coupons.

    def hold_coupon(
        self,
        coupon_id: str,
        *,
        percent_off: float | None = None,
        amount_off: int | None = None,
        duration: str = "repeating",
        duration_in_months: int | None = 3,
    ) -> dict[str, Any]:
        """A coupon made in the dashboard (a test's Stripe-side state)."""
        made: dict[str, Any] = {
            "id": coupon_id,
            "object": "coupon",
            "amount_off": amount_off,
            "created": int(time.time()),
            "currency": "usd" if amount_off else None,
            "duration": duration,
            "duration_in_months": duration_in_months if duration == "repeating" else None,
            "livemode": False,
            "max_redemptions": None,
            "metadata": {},
            "name": coupon_id,
            "percent_off": percent_off,
            "redeem_by": None,
            "times_redeemed": 0,
            "valid": True,
        }
        with self.lock:
            self.coupons[coupon_id] = made
        return made

    def get_coupon(self, request: Request, coupon_id: str) -> Response:
        from dev.stripe_stand_in import _json, _no_such

        with self.lock:
            found = copy.deepcopy(self.coupons.get(coupon_id))
        if found is None:
            raise _no_such("coupon", coupon_id)
        return _json(found)

    def apply_discounts(self, sub: dict[str, Any], discounts: list[dict[str, Any]]) -> None:
        """`discounts[n][coupon]` on a subscription: a discount of it, the coupon redeemed once
        more; `discounts[n][discount]`: one it holds, kept (the list replaces the subscription's
        discounts, as Stripe's does). Called under the lock."""
        from dev.stripe_stand_in import _no_such

        made: list[str] = []
        for n, wanted in enumerate(discounts):
            if wanted.get("discount"):  # one the subscription holds, kept as it is
                kept = str(wanted["discount"])
                if kept not in (sub.get("discounts") or []):
                    raise _no_such("discount", kept, param=f"discounts[{n}][discount]")
                made.append(kept)
                continue
            coupon = self.coupons.get(str(wanted.get("coupon")))
            if coupon is None:
                raise _no_such("coupon", str(wanted.get("coupon")), param=f"discounts[{n}][coupon]")
            now = int(time.time())
            months = coupon.get("duration_in_months")
            discount_id = f"di_local_{secrets.token_hex(10)}"
            self.discount_objects[discount_id] = {
                "id": discount_id,
                "object": "discount",
                "checkout_session": None,
                "customer": sub["customer"],
                "customer_account": None,
                "end": now + int(months) * 30 * DAY if months else None,
                "invoice": None,
                "invoice_item": None,
                "promotion_code": None,
                "source": {"coupon": coupon["id"], "type": "coupon"},
                "start": now,
                "subscription": sub["id"],
                "subscription_item": None,
            }
            coupon["times_redeemed"] += 1
            self.subscription_coupons[sub["id"]] = coupon["id"]
            made.append(discount_id)
        sub["discounts"] = made

    # Time passing.

    def end_period(self, sid: str) -> list[dict[str, Any]]:
        """The subscription reaches its period's end: a cancellation at the period's end ends
        it (`customer.subscription.deleted`); else a scheduled phase starting then takes
        effect, the next period starts and its invoice is paid (`customer.subscription.updated`,
        `invoice.paid`). The events are delivered as the other changes' are; returned too."""
        from dev.stripe_stand_in import _no_such

        sent: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        with self.lock:
            sub = self.subscriptions.get(sid)
            if sub is None:
                raise _no_such("subscription", sid)
            end = int(sub["items"]["data"][0]["current_period_end"])
            if sub.get("cancel_at_period_end"):
                sub |= {"status": "canceled", "ended_at": end}
                sent.append(("customer.subscription.deleted", public(sub), None))
            else:
                previous = {"items": copy.deepcopy(sub["items"])}
                schedule = self.schedules.get(str(sub.get("schedule") or ""))
                items = sub["items"]["data"]
                if schedule is not None:
                    phase = next(
                        (p for p in schedule["phases"] if p["start_date"] >= end - 1), None
                    )
                    if phase is not None:
                        schedule["current_phase"] = {
                            "start_date": phase["start_date"],
                            "end_date": phase["end_date"],
                        }
                        schedule["status"] = "active"
                        first = items[0]
                        price = self._price_or_stub(str(phase["items"][0]["price"]), recurring=True)
                        items = [
                            copy.deepcopy(first)
                            | {"price": price, "plan": shapes.plan_of(price),
                               "quantity": int(phase["items"][0]["quantity"])}
                        ]  # fmt: skip
                        if (
                            phase is schedule["phases"][-1]
                            and schedule["end_behavior"] == "release"
                        ):
                            schedule |= {
                                "status": "released",
                                "released_at": end,
                                "released_subscription": sid,
                                "subscription": None,
                            }
                            sub["schedule"] = None
                for item in items:
                    item["current_period_start"] = end
                    item["current_period_end"] = end + period_seconds(item["price"])
                sub["items"]["data"] = items
                if sub["status"] == "trialing":
                    sub["status"] = "active"
                invoice_id = f"in_local_{secrets.token_hex(12)}"
                lines = self._period_lines(invoice_id, sub, items, end)
                lines += self.pending_prorations.pop(sid, [])
                invoice = self._invoice(
                    invoice_id, sub, lines, created=end, paid=True, reason="subscription_cycle"
                )
                self.invoices[invoice_id] = invoice
                sub["latest_invoice"] = invoice_id
                sent.append(("customer.subscription.updated", public(sub), previous))
                sent.append(("invoice.paid", copy.deepcopy(invoice), None))
            self._save()
        # Time passed: its events are newer than any sent before them (Stripe's `created`
        # counts seconds; a period's end never shares one with the changes made before it).
        with self.lock:
            latest = max((int(e["created"]) for e in self.events), default=0)
        when = max(int(time.time()), latest + 1)
        for event_type, obj, previous_attributes in sent:
            self._send_later(event_type, obj, previous_attributes, created=when)
        return [obj for _, obj, _ in sent]


def public(sub: dict[str, Any]) -> dict[str, Any]:
    """A copy of a subscription, as Stripe answers it."""
    return copy.deepcopy(sub)


def _schedule(
    schedule_id: str, sub: dict[str, Any], phases: list[dict[str, Any]], *, created: int
) -> dict[str, Any]:
    return {
        "id": schedule_id,
        "object": "subscription_schedule",
        "application": None,
        "billing_mode": {"flexible": None, "type": "classic"},
        "canceled_at": None,
        "completed_at": None,
        "created": created,
        "current_phase": {"end_date": phases[0]["end_date"], "start_date": phases[0]["start_date"]},
        "customer": sub["customer"],
        "customer_account": None,
        "default_settings": {
            "application_fee_percent": None,
            "automatic_tax": {"disabled_reason": None, "enabled": False, "liability": None},
            "billing_cycle_anchor": "automatic",
            "billing_thresholds": None,
            "collection_method": "charge_automatically",
            "default_payment_method": None,
            "description": None,
            "invoice_settings": {
                "account_tax_ids": None,
                "custom_fields": None,
                "days_until_due": None,
                "description": None,
                "footer": None,
                "issuer": {"type": "self"},
            },
            "on_behalf_of": None,
            "transfer_data": None,
        },
        "end_behavior": "release",
        "livemode": False,
        "metadata": {},
        "phases": phases,
        "released_at": None,
        "released_subscription": None,
        "status": "active",
        "subscription": sub["id"],
        "test_clock": None,
    }
