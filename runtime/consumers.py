"""Which events each subscriber acts on, declared once. The bus hands each subscriber these and
no others: their Pub/Sub subscriptions' filters are derived here (`MESSAGE_FILTERS`, through
`adapters/bus/filters.py`'s rule), for the emulator and, through `python -m runtime.consumers`
or `flask --app main events filters`, for the deploy (cloudbuild.yaml)."""

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

CONSUMED: dict[str, frozenset[str]] = {
    # Every Stripe event, none of the announcements access itself publishes; the overage of
    # a consumption, reported to Stripe's meter beside the access cycle; the account
    # deletions the api recorded, whose steps take the keys access holds (docs/leaving.md);
    # the automatic top-ups claimed, charged with the Stripe key access holds (topups/).
    "access": SUBSCRIBED_TYPES | {USAGE_RECORDED, ACCOUNT_DELETION_REQUESTED, CREDITS_TOP_UP},
    # The events an e-mail kind is sent for (each kind's triggers, emails/kinds/); the
    # resends an admin asked for, whose copy takes the Resend key emails holds
    # (docs/support.md); and the deletion requests, for which it plans no mail: a filter
    # refusing that one of our events too, beside those it refuses, is over Pub/Sub's 256 bytes;
    # so are the top-ups claimed, for the same reason.
    "emails": handled_types()
    | {EMAIL_RESEND_REQUESTED, ACCOUNT_DELETION_REQUESTED, CREDITS_TOP_UP},
}


def _derived() -> dict[str, str]:
    found = {target: message_filter(types, ON_THE_BUS) for target, types in CONSUMED.items()}
    return {target: expression for target, expression in found.items() if expression}


# The filter of each subscriber's subscription; a subscriber not named here gets every message.
MESSAGE_FILTERS: dict[str, str] = _derived()


def filter_lines() -> list[str]:
    """`<subscriber> <filter>`, one line per filtered subscription."""
    return [f"{target} {expression}" for target, expression in MESSAGE_FILTERS.items()]


if __name__ == "__main__":
    print("\n".join(filter_lines()))


def subscription_of(topic: str, target: str) -> str:
    """The name of this release's subscription feeding `target`: it carries its filter's version."""
    return subscription_name(topic, target, MESSAGE_FILTERS.get(target, ""))
