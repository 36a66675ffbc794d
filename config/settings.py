"""`Settings`: every group of settings composed into the one flat object the service reads.

Each field is the lower-case name of its environment variable (one namespace, no prefixes);
docs/settings.md documents them group by group. Production's rule is the same for every group:
what the process's target requires must be set and must not be a value published anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from config import bus, database, delivery, github, limits, mail, serving, site, stripe, supabase
from config import credits as usage
from config.checks import SettingsError, readable, unsafe_reason
from config.serving import TARGETS

# In the order their lines are reported; `Settings` below lists the same fields classes.
GROUPS = (
    serving.GROUP,
    database.GROUP,
    site.GROUP,
    supabase.GROUP,
    stripe.GROUP,
    mail.GROUP,
    github.GROUP,
    bus.GROUP,
    delivery.GROUP,
    limits.GROUP,
    usage.GROUP,
)

# What each target cannot run without in production: it would fail open or silently
# otherwise. The secrets among them are exactly what the target's code reads
# (tests/deploy/test_secrets.py derives them from it), and what cloudbuild.yaml gives the
# service; the api needs RESEND_API_KEY too when ENABLE_TEST_EMAIL turns its test route on.
PRODUCTION_REQUIRED_BY_TARGET: dict[str, tuple[str, ...]] = {
    target: tuple(name for group in GROUPS for name in group.required.get(target, ()))
    for target in ("api", *TARGETS)
}
# Every setting some target requires.
PRODUCTION_REQUIRED = tuple(
    dict.fromkeys(name for names in PRODUCTION_REQUIRED_BY_TARGET.values() for name in names)
)
# Optional secrets: production does without them, but refuses a public value when one is set.
PRODUCTION_OPTIONAL = tuple(name for group in GROUPS for name in group.optional_secrets)
# Values published in this repository (.env.example, the docs) or by Supabase's local stack:
# anyone can read them, so production treats them as unset.
PUBLIC_VALUES = frozenset(value for group in GROUPS for value in group.public_values)


class Settings(
    serving.ServingSettings,
    database.DatabaseSettings,
    site.SiteSettings,
    supabase.SupabaseSettings,
    stripe.StripeSettings,
    mail.MailSettings,
    github.GitHubSettings,
    bus.BusSettings,
    delivery.DeliverySettings,
    limits.LimitSettings,
    usage.UsageSettings,
    BaseSettings,
):
    """Every setting of the service; names match the environment variables.

    Settings that cannot be used raise `SettingsError`, one line per problem.
    """

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    if not TYPE_CHECKING:  # type checkers keep the signature pydantic gives (each field)

        def __init__(self, **values: Any) -> None:
            try:
                super().__init__(**values)
            except ValidationError as exc:
                raise readable(exc) from None

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        # `NAME=` in an env file or a deploy sets an empty string: it means "not set", never "".
        field = cls.model_fields[info.field_name] if info.field_name else None
        blank = isinstance(value, str) and not value.strip()
        return None if blank and field is not None and field.default is None else value

    @model_validator(mode="before")
    @classmethod
    def _outbox_under_data_dir(cls, values: Any) -> Any:
        # The outbox is local state like the embedded Postgres: it follows DATA_DIR unless set.
        if isinstance(values, dict) and values.get("email_outbox_dir") in (None, ""):
            return {
                **values,
                "email_outbox_dir": Path(values.get("data_dir") or ".data") / "outbox",
            }
        return values

    @model_validator(mode="after")
    def _checked(self) -> Settings:
        # Every group's checks, then production's rule: all problems at once, one line each.
        found = [line for group in GROUPS for line in group.problems(self)]
        found += self._production_problems()
        if found:
            raise SettingsError(found)
        return self

    def _production_problems(self) -> list[str]:
        if not self.is_production:
            return []
        target = self.function_target
        found = [
            f"missing: {name.upper()} (APP_ENV=production requires it for the {target} target)"
            for name in self.production_required
            if getattr(self, name) is None
        ]
        found += [
            f"unsafe: {name.upper()} ({reason})"
            for name in (*PRODUCTION_REQUIRED, *PRODUCTION_OPTIONAL)
            if getattr(self, name) is not None
            and (reason := unsafe_reason(getattr(self, name), PUBLIC_VALUES))
        ]
        return found

    @property
    def production_required(self) -> tuple[str, ...]:
        """What this process's target needs in production (PRODUCTION_REQUIRED_BY_TARGET)."""
        required = PRODUCTION_REQUIRED_BY_TARGET[self.function_target]
        if self.function_target == "api" and self.test_email_enabled:
            required = (*required, "resend_api_key")
        return required
