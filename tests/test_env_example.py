"""`.env.example` documents every setting, each with a comment, and parses as settings."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from config import Settings

ENV_EXAMPLE = Path(__file__).resolve().parent.parent / ".env.example"
# Not a deployment's setting: where local state lives, for tests and tools.
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


def sourced_with_bash(text: str, tmp_path: Path) -> dict[str, str]:
    """What `set -a; . ./.env` exports, in an otherwise empty environment."""
    path = tmp_path / ".env"
    path.write_text(text)
    done = subprocess.run(
        ["bash", "-c", f"set -a; . {path} || exit 9; set +a; env -0"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    pairs = (item.partition("=") for item in done.stdout.split("\0") if item)
    return {k: v for k, _, v in pairs if k in EXAMPLE_NAMES}


def written(text: str) -> dict[str, str]:
    """Each assignment as the file means it: the text after `=`, without enclosing quotes."""
    found = {}
    for line in text.splitlines():
        if (match := SETTING.match(line)) and not line.startswith("#"):
            value = line[match.end() :]
            found[match.group(1)] = value[1:-1] if value[:1] == value[-1:] == '"' else value
    return found


EXAMPLE_NAMES = {name.upper() for name in Settings.model_fields}


def uncommented(text: str) -> str:
    return "\n".join(re.sub(r"^# ([A-Z][A-Z0-9_]+=)", r"\1", line) for line in text.splitlines())


@pytest.mark.parametrize("variant", ["as shipped", "every setting uncommented"])
def test_bash_sources_the_example_to_exactly_what_it_says(
    variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = ENV_EXAMPLE.read_text()
    if variant != "as shipped":
        text = uncommented(text)
    exported = sourced_with_bash(text, tmp_path)
    assert exported == written(text)
    assert set(exported) == (set(documented()) if variant != "as shipped" else set(written(text)))
    assert len(exported) >= 11
    for key, value in exported.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    for key, value in exported.items():
        assert same(getattr(settings, key.lower()), value), key


def test_the_shipped_values_are_the_defaults(tmp_path: Path) -> None:
    shipped = sourced_with_bash(ENV_EXAMPLE.read_text(), tmp_path)
    assert "EMAIL_FROM_ADMIN" in shipped
    for key, value in shipped.items():
        assert same(Settings.model_fields[key.lower()].default, value), key


def same(setting: object, text: str) -> bool:
    """Whether a parsed setting is what `text` says (a URL gains a trailing slash; a blank
    optional setting is unset, config.py's `_blank_is_unset`)."""
    if setting is None:
        return not text.strip()
    if isinstance(setting, bool):
        return str(setting).lower() == text.lower()
    if isinstance(setting, int | float):
        return setting == type(setting)(text)
    if isinstance(setting, SecretStr):
        return setting.get_secret_value() == text
    return str(setting) in (text, text + "/")
