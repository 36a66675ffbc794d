"""`flask --app main ...` ends in one line per problem, never a traceback, when a setting it
needs is missing or the settings cannot be read at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    out, err = process.communicate(timeout=120)
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
