"""Every CLI command ends with one line naming a setting it needs and lacks, never a traceback;
the local-only commands come from dev/ and are there in a checkout."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from config import Settings
from main import create_app

ROOT = Path(__file__).resolve().parents[2]
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
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (1, "", NO_DATABASE + "\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("migrate",), NO_DATABASE),
        (("seed",), NO_DATABASE),
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
    assert {"migrate", "seed", "events filters", "events send", "users create"} <= found
    for path in commands(app.cli):
        command: click.Command = app.cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        assert getattr(command.callback, "one_line_errors", False), path
