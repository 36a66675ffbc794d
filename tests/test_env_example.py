"""The settings' two documents keep step with `config/`: docs/settings.md has a row for every
field, in its group's table, with its default and production's rule; `.env.example` names only
real settings, each under a comment, and parses, with bash and as settings, to what it says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from config import GROUPS, PRODUCTION_OPTIONAL, PRODUCTION_REQUIRED_BY_TARGET, Settings

ROOT = Path(__file__).resolve().parent.parent
ENV_EXAMPLE = ROOT / ".env.example"
SETTINGS_DOC = ROOT / "docs" / "settings.md"
FIELDS = {name.upper() for name in Settings.model_fields}

SETTING = re.compile(r"#?\s?([A-Z][A-Z0-9_]+)=")
HEADING = re.compile(r"^## .*\(`(config/\w+\.py)`\)$")
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \| (.*?) \| (.*) \|\s*(.*?)\s*\|$")


def documented() -> dict[str, bool]:
    """Each setting named in .env.example, and whether a comment line heads its group."""
    lines = ENV_EXAMPLE.read_text().splitlines()
    found = {}
    for number, line in enumerate(lines):
        if match := SETTING.match(line):
            above = number - 1
            while above >= 0 and SETTING.match(lines[above]):
                above -= 1
            found[match.group(1)] = above >= 0 and lines[above].startswith("# ")
    return found


def doc_tables() -> dict[str, dict[str, tuple[str, str]]]:
    """docs/settings.md's tables by the module their heading names: each setting's default
    and production cells."""
    tables: dict[str, dict[str, tuple[str, str]]] = {}
    module = None
    for line in SETTINGS_DOC.read_text().splitlines():
        if heading := HEADING.match(line):
            module = heading.group(1)
            tables[module] = {}
        elif (row := ROW.match(line)) and module is not None:
            name, default, _what, production = row.groups()
            assert name not in tables[module], f"{name} twice in {module}'s table"
            tables[module][name] = (default, production)
    return tables


def module_of(fields: type) -> str:
    return fields.__module__.replace(".", "/") + ".py"


def test_every_variable_in_the_example_is_a_setting_under_a_comment() -> None:
    found = documented()
    assert set(found) <= FIELDS, f"not settings: {sorted(set(found) - FIELDS)}"
    assert [name for name, commented in found.items() if not commented] == []
    # What a founder sets: the keys, the senders, the site.
    assert {"STRIPE_SECRET_KEY", "SUPABASE_URL", "RESEND_API_KEY", "SITE_URL"} <= set(found)
    assert {"EMAIL_FROM_ADMIN", "EMAIL_FROM_NOREPLY", "BRAND_NAME"} <= set(found)


def test_every_setting_has_a_row_in_its_groups_table() -> None:
    tables = doc_tables()
    assert set(tables) == {module_of(group.fields) for group in GROUPS}
    rows = [name for table in tables.values() for name in table]
    assert sorted(rows) == sorted(FIELDS), "each setting documented once"
    for group in GROUPS:
        # Every group extends APP_ENV's (config/environment.py); serving's table lists it.
        own = {name.upper() for name in group.fields.model_fields} - {"APP_ENV"}
        table = set(tables[module_of(group.fields)])
        assert own <= table <= own | {"APP_ENV"}, module_of(group.fields)


def test_the_documented_defaults_are_the_defaults() -> None:
    for table in doc_tables().values():
        for name, (default, _) in table.items():
            value = Settings.model_fields[name.lower()].default
            if value in (None, ""):
                assert default.startswith("unset"), name
            else:
                assert (quoted := re.fullmatch(r"`([^`]*)`", default)), f"{name}: {default}"
                assert same(value, quoted.group(1)), name


def test_the_documented_production_rules_are_the_rules() -> None:
    requiring: dict[str, set[str]] = {}
    for target, names in PRODUCTION_REQUIRED_BY_TARGET.items():
        for name in names:
            requiring.setdefault(name.upper(), set()).add(target)
    for table in doc_tables().values():
        for name, (_, production) in table.items():
            if name in requiring:
                # "required by api, access" (what follows may add when, as for the api's Resend)
                said = re.match(
                    r"required by ((?:api|access|emails)(?:, (?:api|access|emails))*)", production
                )
                assert said, name
                assert set(said.group(1).split(", ")) == requiring[name], name
            else:
                assert "required by" not in production, name
            optional = name.lower() in PRODUCTION_OPTIONAL
            assert optional == production.startswith("optional; a public value is refused"), name


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
    return {k: v for k, _, v in pairs if k in FIELDS}


def written(text: str) -> dict[str, str]:
    """Each assignment as the file means it: the text after `=`, without enclosing quotes."""
    found = {}
    for line in text.splitlines():
        if (match := SETTING.match(line)) and not line.startswith("#"):
            value = line[match.end() :]
            found[match.group(1)] = value[1:-1] if value[:1] == value[-1:] == '"' else value
    return found


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
    assert len(exported) >= (15 if variant != "as shipped" else 4)
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
    optional setting is unset, `Settings._blank_is_unset`)."""
    if setting is None:
        return not text.strip()
    if isinstance(setting, bool):
        return str(setting).lower() == text.lower()
    if isinstance(setting, int | float):
        return setting == type(setting)(text)
    if isinstance(setting, SecretStr):
        return setting.get_secret_value() == text
    return str(setting) in (text, text + "/")
