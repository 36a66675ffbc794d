"""`.env.example` documents every setting, each with a comment, and parses as settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config import Settings

ENV_EXAMPLE = Path(__file__).resolve().parent.parent / ".env.example"
# Not a contract of DESIGN.md: where local state lives, for tests and tools.
UNDOCUMENTED = {"DATA_DIR"}


SETTING = re.compile(r"#?\s?([A-Z][A-Z0-9_]+)=")


def documented() -> dict[str, bool]:
    """Each setting named in the file, and whether a comment line heads its group."""
    lines = ENV_EXAMPLE.read_text().splitlines()
    found = {}
    for number, line in enumerate(lines):
        if match := SETTING.match(line):
            above = number - 1
            while above >= 0 and SETTING.match(lines[above]):
                above -= 1
            found[match.group(1)] = above >= 0 and lines[above].startswith("# ")
    return found


def test_every_setting_is_documented_with_a_comment() -> None:
    names = {name.upper() for name in Settings.model_fields} - UNDOCUMENTED
    found = documented()
    assert names <= set(found), f"missing from .env.example: {sorted(names - set(found))}"
    assert [name for name, commented in found.items() if not commented] == []
    assert set(found) <= names | {"FUNCTION_TARGET"}


def test_the_example_values_are_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.email_from_admin == "Acme Team <hello@example.com>"
    assert settings.event_bus == "inline"
