"""`flask --app main ...` ends in one line per problem, never a traceback, when a setting it
needs is missing or the settings cannot be read at all; the local-only commands come from dev/
and are there in a checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from config import Settings
from main import create_app
from tests.helpers import HANG_GUARD

ROOT = Path(__file__).resolve().parent.parent.parent


def flask(*args: str, **env: str) -> subprocess.Popen[str]:
    """The real CLI in a clean environment: no `.env`, no inherited settings."""
    return subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "main", *args],
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLASK_SKIP_DOTENV": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, list[str]]:
    out, err = process.communicate(timeout=HANG_GUARD)
    return process.returncode, (out + err).splitlines()


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ("migrate",),
            {},
            [
                "Error: DATABASE_URL is not set: `make run` starts a local Postgres and prints"
                " its URL"
            ],
        ),
        (
            ("events", "reconcile", "--dry-run"),
            {},
            ["Error: Payments are not configured: set STRIPE_SECRET_KEY"],
        ),
        (
            ("seed",),
            {"APP_ENV": "production", "EVENT_BUS": "pubsub", "DATABASE_POOL_SIZE": "many"},
            [
                "Error: DATABASE_POOL_SIZE: Input should be a valid integer, unable to parse"
                " string as an integer"
            ],
        ),
        (
            ("migrate",),
            {"APP_ENV": "production", "EVENT_BUS": "pubsub", "FUNCTION_TARGET": "access"},
            [
                "Error: missing: PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT (APP_ENV=production: the"
                " access push target checks Pub/Sub's push token)",
                *(
                    f"missing: {name} (APP_ENV=production requires it for the access target)"
                    for name in (
                        "DATABASE_URL",
                        "SITE_URL",
                        "SUPABASE_URL",
                        "SUPABASE_SECRET_KEY",
                        "STRIPE_SECRET_KEY",
                    )
                ),
            ],
        ),
    ],
    ids=["no database", "no stripe key", "a wrong value", "production without its secrets"],
)
def test_a_missing_or_wrong_setting_ends_a_command_in_one_line_each(
    args: tuple[str, ...], env: dict[str, str], expected: list[str]
) -> None:
    status, lines = finished(flask(*args, **env))
    assert (status, lines) == (1, expected)


NO_DATABASE = (
    "Error: DATABASE_URL is not set: `make run` starts a local Postgres and prints its URL"
)


def bare_settings(tmp_path: Path) -> Settings:
    """Development settings that give neither a database nor Stripe."""
    return Settings(
        app_env="development",
        database_url=None,
        stripe_secret_key=None,
        email_outbox_dir=tmp_path / "outbox",
        data_dir=tmp_path / "data",
    )


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def test_events_send_without_a_database_says_so_in_one_line(tmp_path: Path) -> None:
    """As a person runs it, in a shell that sets nothing."""
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "main", "events", "send", "invoice.paid"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (1, "", NO_DATABASE + "\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("migrate",), NO_DATABASE),
        # The catalogue is read from Stripe first (no transaction waits on Stripe).
        (("seed",), "Error: Payments are not configured: set STRIPE_SECRET_KEY"),
        (("products", "sync"), "Error: Payments are not configured: set STRIPE_SECRET_KEY"),
        (("users", "create", "ada@example.com"), NO_DATABASE),
        (("users", "show", "ada@example.com"), NO_DATABASE),
        (
            ("events", "reconcile", "--dry-run"),
            "Error: Payments are not configured: set STRIPE_SECRET_KEY",
        ),
    ],
)
def test_a_missing_setting_is_one_line_naming_it(
    tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    app = create_app(bare_settings(tmp_path))
    with app.app_context():  # as `flask` pushes it for every command
        result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 1
    assert result.output.splitlines() == [line]


def test_every_command_the_app_has_answers_so(tmp_path: Path) -> None:
    app = create_app(bare_settings(tmp_path))
    found = {" ".join(path) for path in commands(app.cli)}
    # The local-only commands are there in a checkout (dev/ is), beside production's.
    assert {
        "migrate",
        "seed",
        "products sync",
        "events filters",
        "events send",
        "users create",
    } <= found
    # Each command is guarded itself or through the group that invokes it.
    for path in commands(app.cli):
        command: click.Command = app.cli
        guarded = False
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
            guarded = guarded or getattr(command, "guarded", False)
        assert guarded, path
