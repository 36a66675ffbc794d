"""What a subscription event says of revenue, as plain data: the subscription's monthly
recurring revenue (MRR) after it, how that moved, and why a customer cancelled.

A subscription's MRR is what Stripe bills it per month, in its currency's minor unit: each
item's unit amount times its quantity (a metered item's usage is billed after it, and is not
counted), a yearly (or weekly, daily) price brought to a month, less a coupon that the event
names. A trial pays nothing yet, nor does a subscription whose first payment is still due, nor
one whose collection is paused: their MRR is zero until they pay. An ended one's is zero too.
Its MRR is ordered on its own per subscription (Stripe's `created`, then created < updated <
deleted within a second), like a plan change: an older event delivered late moves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

from core.events import stripe_id
from core.money import to_minor

# Statuses Stripe bills (past_due: it retries the card), as the metrics' MRR counts them.
PAYING = frozenset({"active", "past_due"})
# A price's interval as months.
MONTHS = {
    "day": Decimal(12) / Decimal(365),
    "week": Decimal(12) / Decimal(52),
    "month": Decimal(1),
    "year": Decimal(12),
}
# Within one second (Stripe's `created` resolution) a subscription is created, then updated,
# then deleted: the later kind is the newer state.
RANKS = {
    "customer.subscription.created": 0,
    "customer.subscription.updated": 1,
    "customer.subscription.deleted": 2,
}

Kind = Literal["new", "expansion", "contraction", "churn"]

_CODE = re.compile(r"[a-z]{3}")


@dataclass(frozen=True)
class Item:
    """One item of a subscription, as its event tells it: the amount is None when the event
    does not carry it (the catalogue's price is read instead)."""

    price_id: str | None
    quantity: int
    unit_amount: Decimal | None  # minor units
    currency: str | None
    interval: str | None
    interval_count: int
    # Billed in arrears for what was used (a meter's overage): no recurring revenue.
    metered: bool = False


@dataclass(frozen=True)
class Coupon:
    percent_off: Decimal | None
    amount_off: int | None  # minor units, per invoice
    currency: str | None


@dataclass(frozen=True)
class CataloguePrice:
    """A price as the catalogue keeps it: in major units."""

    price: Decimal
    interval: str | None
    currency: str | None


@dataclass(frozen=True)
class Cancellation:
    """A subscription cancelled or set to cancel, and what its customer said (Stripe's
    `cancellation_details`): the comment's text is not kept, only that there was one."""

    feedback: str | None
    has_comment: bool
    reason: str | None


@dataclass(frozen=True)
class Snapshot:
    """A subscription as one of its events shows it."""

    subscription_id: str
    rank: int
    status: str
    ended: bool
    # Stripe's `pause_collection`: it runs without being billed (its MRR is zero meanwhile).
    collection_paused: bool
    items: tuple[Item, ...]
    coupon: Coupon | None
    cancellation: Cancellation | None  # None: not cancelled (or the cancellation withdrawn)


@dataclass(frozen=True)
class Level:
    """A subscription's MRR as last recorded, and when Stripe said it."""

    currency: str
    amount: int
    at: datetime
    rank: int


@dataclass(frozen=True)
class Movement:
    event_id: str
    subscription_id: str
    account_id: str | None
    currency: str
    delta: int
    kind: Kind
    at: datetime


def snapshot(event_type: str, subscription: Mapping[str, Any]) -> Snapshot | None:
    """The snapshot of a subscription event; None for any other event."""
    rank = RANKS.get(event_type)
    sub_id = stripe_id(subscription.get("id"))
    if rank is None or sub_id is None:
        return None
    status = str(subscription.get("status") or "")
    ended = event_type == "customer.subscription.deleted" or status in (
        "canceled",
        "unpaid",
        "incomplete_expired",
        "paused",
    )
    data = _mapping(subscription.get("items")).get("data")
    items = (
        tuple(_item(i) for i in data if isinstance(i, Mapping)) if isinstance(data, list) else ()
    )
    return Snapshot(
        subscription_id=sub_id,
        rank=rank,
        status=status,
        ended=ended,
        collection_paused=bool(_mapping(subscription.get("pause_collection"))),
        items=items,
        coupon=_coupon(subscription.get("discount")),
        cancellation=_cancellation(subscription, ended=ended),
    )


def monthly(snap: Snapshot, prices: Mapping[str, CataloguePrice]) -> tuple[str | None, int] | None:
    """The subscription's MRR after this event, with its currency (None: an ended or unpaid
    subscription whose items say none); None when an item's amount or interval is unknown."""
    currency = next((i.currency for i in snap.items if i.currency), None)
    if currency is None:
        currency = next(
            (p.currency for i in snap.items if (p := prices.get(i.price_id or "")) and p.currency),
            None,
        )
    if snap.ended or snap.status not in PAYING or snap.collection_paused:
        return currency, 0
    total = Decimal(0)
    for item in snap.items:
        if item.metered:
            continue
        amount, interval, count, own = item.unit_amount, item.interval, item.interval_count, None
        if amount is None or interval is None:
            known = prices.get(item.price_id or "")
            if known is None or known.currency is None or known.interval is None:
                return None
            amount, interval, count, own = (
                to_minor(known.price, known.currency),
                known.interval,
                1,
                known.currency,
            )
        months = MONTHS.get(interval)
        if months is None or (own and currency and own != currency):
            return None
        total += amount * item.quantity / (months * count)
    if currency is None:
        return None
    return currency, _rounded(_discounted(max(total, Decimal(0)), snap, currency))


def newer(at: datetime, rank: int, level: Level | None) -> bool:
    """Whether a snapshot Stripe dated `at` is newer than the level recorded (at the same
    second and kind, the one delivered later stands)."""
    return level is None or (at, rank) >= (level.at, level.rank)


def kind(before: int, after: int, *, ended: bool) -> Kind | None:
    """What moved a subscription's MRR from `before` to `after`; None: nothing moved."""
    if after == before:
        return None
    if before == 0:
        return "new"
    if after == 0 and ended:
        return "churn"
    return "expansion" if after > before else "contraction"


def moved(
    before: Level | None,
    currency: str | None,
    after: int,
    *,
    ended: bool,
    event_id: str,
    subscription_id: str,
    account_id: str | None,
    at: datetime,
) -> Movement | None:
    """The movement from the level recorded to the one an event says (a subscription keeps
    its currency: Stripe does not change it)."""
    was = before.amount if before is not None else 0
    money = currency or (before.currency if before is not None else None)
    found = kind(was, after, ended=ended)
    if found is None or money is None:
        return None
    return Movement(event_id, subscription_id, account_id, money, after - was, found, at)


@dataclass(frozen=True)
class Totals:
    new: int = 0
    expansion: int = 0
    contraction: int = 0
    churn: int = 0

    @property
    def net(self) -> int:
        return self.new + self.expansion + self.contraction + self.churn


def totals(movements: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Movements per currency, as the metrics answer them: contraction and churn as the
    negative amounts they are, `net` their sum."""
    sums: dict[str, dict[str, int]] = {}
    for m in movements:
        per = sums.setdefault(str(m["currency"]), {})
        per[str(m["kind"])] = per.get(str(m["kind"]), 0) + int(m["delta"])
    return [
        {
            "currency": currency,
            "new": (t := Totals(**per)).new,
            "expansion": t.expansion,
            "contraction": t.contraction,
            "churn": t.churn,
            "net": t.net,
        }
        for currency, per in sorted(sums.items())
    ]


def _discounted(total: Decimal, snap: Snapshot, currency: str) -> Decimal:
    coupon = snap.coupon
    if coupon is None:
        return total
    if coupon.percent_off is not None:
        total = total * (Decimal(100) - coupon.percent_off) / Decimal(100)
    if coupon.amount_off is not None and (coupon.currency or currency) == currency:
        # Taken off each invoice: brought to a month by the first item's interval.
        first = snap.items[0] if snap.items else None
        months = MONTHS.get(first.interval or "month") if first else Decimal(1)
        count = first.interval_count if first else 1
        total -= Decimal(coupon.amount_off) / ((months or Decimal(1)) * count)
    return max(total, Decimal(0))


def _rounded(amount: Decimal) -> int:
    return int(amount.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _item(item: Mapping[str, Any]) -> Item:
    price = _mapping(item.get("price"))
    recurring = _mapping(price.get("recurring"))
    quantity = item.get("quantity")
    return Item(
        price_id=stripe_id(price) if price else stripe_id(item.get("price")),
        quantity=quantity if isinstance(quantity, int) and quantity >= 0 else 1,
        unit_amount=_amount(price),
        currency=_currency(price.get("currency")),
        interval=recurring.get("interval") if isinstance(recurring.get("interval"), str) else None,
        interval_count=_count(recurring.get("interval_count")),
        metered=recurring.get("usage_type") == "metered",
    )


def _amount(price: Mapping[str, Any]) -> Decimal | None:
    """The price's unit amount in minor units; None when it says none (or none that can be)."""
    found: Decimal | None = None
    if isinstance(price.get("unit_amount"), int) and not isinstance(price["unit_amount"], bool):
        found = Decimal(price["unit_amount"])
    elif isinstance(price.get("unit_amount_decimal"), str):
        try:
            found = Decimal(price["unit_amount_decimal"])
        except ArithmeticError:
            return None
    return found if found is not None and found.is_finite() and found >= 0 else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 1


def _coupon(discount: Any) -> Coupon | None:
    coupon = _mapping(_mapping(discount).get("coupon"))
    if not coupon:
        return None
    percent = coupon.get("percent_off")
    amount = coupon.get("amount_off")
    return Coupon(
        percent_off=_percent(percent),
        amount_off=amount if isinstance(amount, int) and amount >= 0 else None,
        currency=_currency(coupon.get("currency")),
    )


def _cancellation(subscription: Mapping[str, Any], *, ended: bool) -> Cancellation | None:
    """Cancelled (ended, or set to end at the period's end or at a date) with its details;
    None while it runs on, and for one that never began (its first payment never made)."""
    if subscription.get("status") == "incomplete_expired":
        return None
    cancelling = (
        ended
        or subscription.get("cancel_at_period_end") is True
        or bool(subscription.get("cancel_at"))
    )
    if not cancelling:
        return None
    details = _mapping(subscription.get("cancellation_details"))
    feedback, comment, reason = (details.get(k) for k in ("feedback", "comment", "reason"))
    return Cancellation(
        feedback=feedback if isinstance(feedback, str) and feedback else None,
        has_comment=isinstance(comment, str) and bool(comment.strip()),
        reason=reason if isinstance(reason, str) and reason else None,
    )


def _percent(value: Any) -> Decimal | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    found = Decimal(str(value))
    return found if found.is_finite() and 0 <= found <= 100 else None


def _currency(value: Any) -> str | None:
    """An ISO 4217 code as Stripe writes it (lower case); None for anything else, which the
    tables would refuse (and with them the access change they are written with)."""
    code = value.strip().lower() if isinstance(value, str) else ""
    return code if _CODE.fullmatch(code) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
