"""The event bus between the webhook and the subscribers: Pub/Sub, or in-process locally."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from config.checks import Group
from config.environment import Environment

if TYPE_CHECKING:
    from config.settings import Settings


class BusSettings(Environment):
    event_bus: Literal["inline", "pubsub"] = "inline"
    google_cloud_project: str = "local-project"
    pubsub_topic: str = "payment-events"
    pubsub_emulator_host: str | None = None
    # The in-process bus (local runs): past this many queued deliveries for access the webhook
    # answers 503 and Stripe retries, instead of memory growing without end; e-mail, which
    # yields to access during a burst, may queue up to the backlog.
    inline_bus_max_pending: int = Field(default=2000, ge=1, le=1_000_000)
    inline_bus_max_backlog: int = Field(default=20_000, ge=1, le=1_000_000)


def problems(s: Settings) -> Iterator[str]:
    # In-process, an event acknowledged to Stripe lives only in this process's memory.
    if s.is_production and s.event_bus != "pubsub":
        yield "EVENT_BUS: APP_ENV=production requires EVENT_BUS=pubsub"


GROUP = Group(fields=BusSettings, problems=problems)
