"""Usage: the secret the founder's other services consume credits with (`POST /api/usage`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import SecretStr, field_validator

from config.checks import Group, secret
from config.environment import Environment

if TYPE_CHECKING:
    from config.settings import Settings

SHORTEST_KEY = 32  # a bearer secret a stranger cannot guess


class UsageSettings(Environment):
    # Sent as `Authorization: Bearer <key>` to POST /api/usage. Unset: the route answers 404.
    usage_api_key: SecretStr | None = None
    # Whether this deployment sells consumption over HTTP (products with `credits` or a
    # `meter` whose use other services report): production then requires USAGE_API_KEY. The
    # catalogue lives in Stripe and Postgres, which start-up does not read: the founder says so.
    sells_usage: bool = False
    # The signing secret of the Stripe event destination that sends the meters' thin events
    # (`v1.billing.meter.error_report_triggered`, `v1.billing.meter.no_meter_found`) to
    # /api/webhook/payments: a destination has its own secret. Unset: such events are refused.
    stripe_meter_events_secret: SecretStr | None = None
    # The percentages of a grant used (of each period's credits, or of a pack) at which its
    # holder is mailed and `app.credits.threshold` is published, once each per period
    # (comma-separated, 1 to 100). Empty: no alerts.
    credits_alerts: str = "90"

    @field_validator("credits_alerts")
    @classmethod
    def _alerts(cls, value: str) -> str:
        alert_thresholds(value)  # raises naming the value that is not a percentage
        return value

    @property
    def credits_alert_thresholds(self) -> tuple[int, ...]:
        return alert_thresholds(self.credits_alerts)


def alert_thresholds(text: str) -> tuple[int, ...]:
    """The percentages of a grant used that its holder is told of (`CREDITS_ALERTS`, such as
    `50,90,100`), in order. Raises ValueError naming a value that is not 1 to 100."""
    found: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or not 1 <= int(part) <= 100:
            raise ValueError(f"CREDITS_ALERTS: {part!r} is not a percentage 1 to 100")
        found.add(int(part))
    return tuple(sorted(found))


def _problems(settings: Settings) -> Iterable[str]:
    key = secret(settings.usage_api_key)
    api = settings.is_production and settings.function_target == "api"
    if api and settings.sells_usage and key is None:
        yield "missing: USAGE_API_KEY (SELLS_USAGE=true requires it in production)"
    if key is not None and len(key.strip()) < SHORTEST_KEY and settings.is_production:
        yield f"unsafe: USAGE_API_KEY (shorter than {SHORTEST_KEY} characters)"


GROUP = Group(
    fields=UsageSettings,
    optional_secrets=("usage_api_key", "stripe_meter_events_secret"),
    problems=_problems,
)
