"""How a subscriber target (access, emails) receives events: a push subscription and the
authentication of its pushes, or StreamingPull."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import AnyHttpUrl, Field

from config.checks import Group, unsafe_reason
from config.environment import Environment
from config.serving import TARGETS

if TYPE_CHECKING:
    from config.settings import Settings


class DeliverySettings(Environment):
    # `push` (a Cloud Run service behind a push subscription: the default) or `pull`
    # (StreamingPull, in a worker pool or an always-on service: access then applies up to
    # PULL_BATCH_SIZE events in one transaction). Pull holds at most PULL_MAX_MESSAGES leased at
    # once; e-mail sends GUNICORN_THREADS at a time.
    subscriber_delivery: Literal["push", "pull"] = "push"
    pull_max_messages: int = Field(default=500, ge=1, le=10_000)
    pull_batch_size: int = Field(default=64, ge=1, le=500)
    # Pub/Sub push authentication on the subscriber targets: the token's audience and account.
    # Unset, a push target refuses every push (401); production refuses to start without them.
    push_audience: str | None = None
    push_service_account: str | None = None
    push_certs_url: AnyHttpUrl = AnyHttpUrl("https://www.googleapis.com/oauth2/v1/certs")
    # Cloud Run's IAM invoker check is on (`--no-allow-unauthenticated`, no
    # `--no-invoker-iam-check`): it verifies the token and forwards it with its signature removed.
    # Off: the token arrives as Pub/Sub signed it and only a full signature is accepted.
    push_invoker_iam_check: bool = True


def problems(s: Settings) -> Iterator[str]:
    pushed = s.function_target in TARGETS and s.subscriber_delivery == "push"
    unset = any(unsafe_reason(v, frozenset()) for v in (s.push_audience, s.push_service_account))
    if (s.push_audience is None) != (s.push_service_account is None):
        yield "set PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT together, or neither"
    elif s.is_production and pushed and unset:
        # Without them a push target could not tell Pub/Sub's pushes from anyone's.
        yield (
            f"missing: PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT (APP_ENV=production: the"
            f" {s.function_target} push target checks Pub/Sub's push token)"
        )
    if s.subscriber_delivery == "pull" and s.function_target not in TARGETS:
        yield (
            "SUBSCRIBER_DELIVERY=pull is for a subscriber target: set FUNCTION_TARGET to"
            f" one of {', '.join(TARGETS)}, not {s.function_target!r}"
        )
    if s.subscriber_delivery == "pull" and s.event_bus != "pubsub":
        yield "SUBSCRIBER_DELIVERY=pull reads Pub/Sub: set EVENT_BUS=pubsub"


GROUP = Group(fields=DeliverySettings, problems=problems)
