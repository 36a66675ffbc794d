"""What every group of settings shares: its errors, the shape of its production rules, and how a
refused value is told apart from a usable one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, SecretStr, ValidationError

if TYPE_CHECKING:
    from config.settings import Settings


class SettingsError(ValueError):
    """Settings the service cannot start with: one readable line per problem, each naming the
    environment variable, never its value's secret part."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class MissingSetting(RuntimeError):
    """A setting that one use needs is not set: raised where it is used (a command, a client
    built on first use), so the rest of the service runs without it."""


def _no_problems(_settings: Settings) -> Iterable[str]:
    return ()


@dataclass(frozen=True)
class Group:
    """One concern's settings: its fields (a mixin of `Settings`), what each target cannot run
    without in production, the optional secrets production still refuses a public value for,
    the public values that guard them, and the checks that need more than one field."""

    fields: type[BaseModel]
    required: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    optional_secrets: tuple[str, ...] = ()
    public_values: frozenset[str] = frozenset()
    problems: Callable[[Settings], Iterable[str]] = _no_problems


def secret(value: SecretStr | None) -> str | None:
    """The plain value of an optional secret."""
    return value.get_secret_value() if value is not None else None


def unsafe_reason(value: object, public: frozenset[str]) -> str | None:
    """Why a configured secret cannot be trusted in production, or None when it can."""
    if value is None:
        return "missing"
    text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    text = text.strip().rstrip("/")
    if not text:
        return "empty"
    # `sk_test_...` and the like: a placeholder copied from an example, not a key.
    if text in public or text.endswith("..."):
        return "a public example or development value"
    return None


def readable(exc: ValidationError) -> SettingsError:
    """One line per problem, each naming the setting, without the validation library's framing
    (its counts, error types, links) or the input, which may be a secret."""
    lines: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, SettingsError):  # the groups' checks, raised inside validation
            lines.extend(cause.problems)
            continue
        message = str(cause) if isinstance(cause, ValueError) else error["msg"]
        name = ".".join(str(part) for part in error["loc"]).upper()
        lines.append(message if not name or message.startswith(name) else f"{name}: {message}")
    return SettingsError(lines)
