"""Which events each subscriber acts on, declared once. The bus hands each subscriber these and
no others: `adapters/bus/filters.py` turns them into the Pub/Sub subscriptions' filters, for the
emulator and, through `flask --app main events filters`, for the deploy (cloudbuild.yaml)."""

from __future__ import annotations

from core.app_events import (
    ACCOUNT_DELETION_REQUESTED,
    APP_EVENTS,
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
    # deletions the api recorded, whose steps take the keys access holds (docs/leaving.md).
    "access": SUBSCRIBED_TYPES | {USAGE_RECORDED, ACCOUNT_DELETION_REQUESTED},
    # The events an e-mail kind is sent for (each kind's triggers, emails/kinds/); the
    # resends an admin asked for, whose copy takes the Resend key emails holds
    # (docs/support.md); and the deletion requests, for which it plans no mail: a filter
    # refusing that one of our events too, beside those it refuses, is over Pub/Sub's 256 bytes.
    "emails": handled_types() | {EMAIL_RESEND_REQUESTED, ACCOUNT_DELETION_REQUESTED},
}
