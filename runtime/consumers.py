"""Which events each subscriber target acts on, and which domain handles them, declared once.

`HANDLERS` maps each target to its handlers, each named for the domain job it does and the event
types it takes; `runtime/container.py` builds the handler behind each name and a `Dispatch`
hands each its events. The bus hands each target these types and no others: their Pub/Sub
subscriptions' filters are derived here (`MESSAGE_FILTERS`, through `adapters/bus/filters.py`'s
rule), for the emulator and, through `python -m runtime.consumers` or `flask --app main events
filters`, for the deploy (cloudbuild.yaml). A new event type is a line here and its handler."""

from __future__ import annotations

from adapters.bus.filters import message_filter, subscription_name
from core.app_events import (
    ACCOUNT_DELETION_REQUESTED,
    APP_EVENTS,
    CREDITS_TOP_UP,
    EMAIL_RESEND_REQUESTED,
    USAGE_RECORDED,
)
from core.events import SUBSCRIBED_TYPES
from emails.plan import handled_types

# Everything that travels on the bus: Stripe's events of the subscribed types (the webhook
# drops the others at the door) and the application's own.
ON_THE_BUS: frozenset[str] = SUBSCRIBED_TYPES | APP_EVENTS

# Each handler's name is the container's (`Container.handler`); the domain it runs is named beside.
HANDLERS: dict[str, dict[str, frozenset[str]]] = {
    "access": {
        # Every Stripe event, none of the announcements access itself publishes
        # (access/subscriber.py).
        "access": SUBSCRIBED_TYPES,
        # The overage of a consumption, reported to Stripe's meter (credits/meter.py).
        "overage": frozenset({USAGE_RECORDED}),
        # The account deletions the api recorded, whose steps take the keys access holds
        # (accounts/leaving.py, docs/leaving.md).
        "deletion": frozenset({ACCOUNT_DELETION_REQUESTED}),
        # The automatic top-ups claimed, charged with the Stripe key access holds
        # (topups/charge.py; their payment intents' events come to the access cycle above,
        # which hands a top-up's to topups/ and settles the ledger).
        "top-up": frozenset({CREDITS_TOP_UP}),
    },
    "emails": {
        # The events an e-mail kind is sent for (each kind's triggers, emails/kinds/); the
        # resends an admin asked for, whose copy takes the Resend key emails holds
        # (docs/support.md); and the deletion requests, for which it plans no mail: a filter
        # refusing that one of our events too, beside those it refuses, is over Pub/Sub's
        # 256 bytes; so are the top-ups claimed, for the same reason.
        "mail": handled_types()
        | {EMAIL_RESEND_REQUESTED, ACCOUNT_DELETION_REQUESTED, CREDITS_TOP_UP},
    },
}

# The handler that takes what no row of its target names: Pub/Sub's filters hand a target only
# its own types, but the in-process bus hands every target every event, and access answers a
# Stripe event it applies nothing for as e-mail answers one it sends nothing for.
FALLBACK: dict[str, str] = {"access": "access", "emails": "mail"}

# The event types each target takes: the union of its handlers'.
CONSUMED: dict[str, frozenset[str]] = {
    target: frozenset().union(*handlers.values()) for target, handlers in HANDLERS.items()
}


def handler_of(target: str, event_type: str) -> str | None:
    """The name of the handler of `target` that takes `event_type`."""
    for name, types in HANDLERS[target].items():
        if event_type in types:
            return name
    return FALLBACK.get(target)


def _derived() -> dict[str, str]:
    found = {target: message_filter(types, ON_THE_BUS) for target, types in CONSUMED.items()}
    return {target: expression for target, expression in found.items() if expression}


# The filter of each subscriber's subscription; a subscriber not named here gets every message.
MESSAGE_FILTERS: dict[str, str] = _derived()


def filter_lines() -> list[str]:
    """`<subscriber> <filter>`, one line per filtered subscription."""
    return [f"{target} {expression}" for target, expression in MESSAGE_FILTERS.items()]


def subscription_of(topic: str, target: str) -> str:
    """The name of this release's subscription feeding `target`: it carries its filter's version."""
    return subscription_name(topic, target, MESSAGE_FILTERS.get(target, ""))


if __name__ == "__main__":
    print("\n".join(filter_lines()))
