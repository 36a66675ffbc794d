"""Which e-mail an event calls for, and its props, from plain facts; no I/O.

Each kind says which events call for it (its `triggers`, in `emails/kinds/`); an event
calls for one e-mail at most.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from access.checkouts import checkout_from, subscription_price
from catalogue.rules import EmailProduct
from core.events import Event, is_app_event, stripe_id
from core.stripe_objects import charged_price, customer_contact
from emails.kind import Build, get
from emails.kinds import REGISTRY

__all__ = ["EmailProduct", "PlannedEmail", "Recipient", "handled_types", "kind_for", "plan"]


@dataclass(frozen=True)
class Recipient:
    email: str
    name: str | None = None


@dataclass(frozen=True)
class PlannedEmail:
    kind: str
    to: str
    props: dict[str, Any]


def _builders() -> dict[str, tuple[str, Build]]:
    found: dict[str, tuple[str, Build]] = {}
    for kind in REGISTRY.values():
        for event_type, build in kind.triggers.items():
            if event_type in found:
                raise ValueError(
                    f"{event_type} calls for both {found[event_type][0]} and {kind.name}:"
                    " an event calls for one e-mail at most"
                )
            found[event_type] = (kind.name, build)
    return found


_BUILDERS: Mapping[str, tuple[str, Build]] = _builders()


def price_of(event: Event) -> str | None:
    """The Stripe price an event is about, to look the product up."""
    obj = event.object
    if (checkout := checkout_from(event)) is not None:
        return checkout.price_id
    if is_app_event(event.type):
        found = obj.get("price_id")
    elif event.type == "checkout.session.expired":
        found = get(obj, "metadata", "price_id")
    elif event.type.startswith("invoice."):
        found = charged_price(obj)  # a plan change's receipt names the new plan
    elif event.type.startswith("customer.subscription."):
        found = subscription_price(obj)
    else:
        found = None
    return found if isinstance(found, str) else None


def customer_of(event: Event) -> str | None:
    """The Stripe customer id, for events that name no e-mail address."""
    return stripe_id(event.object.get("customer"))


def recipient_in(event: Event) -> Recipient | None:
    """The address the event itself carries, if any."""
    email, name = customer_contact(event.object)
    return Recipient(email=email, name=name) if email else None


def plan(
    event: Event, *, to: Recipient, product: EmailProduct | None, site_url: str
) -> PlannedEmail | None:
    """The e-mail for an event, or None when the event calls for none."""
    found = _BUILDERS.get(event.type)
    if found is None:
        return None
    kind, build = found
    values = build(event, product, site_url)
    if values is None:
        return None
    return PlannedEmail(kind=kind, to=to.email, props={"customer_name": to.name, **values})


def kind_for(event_type: str) -> str | None:
    """The kind of e-mail an event of this type may call for (its facts may call for none)."""
    found = _BUILDERS.get(event_type)
    return found[0] if found else None


def handled_types() -> frozenset[str]:
    """The event types an e-mail may be planned for (the push filter lets them through)."""
    return frozenset(_BUILDERS)
