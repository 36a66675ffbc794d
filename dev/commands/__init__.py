"""Local-only CLI commands: `flask --app main users ...` and `flask --app main events send`.

The composition root (main.py) adds them when this package is there: the image leaves dev/
out, so a deployed service has none of them (and `users` refuses APP_ENV=production anyway).
"""

from __future__ import annotations

from flask import Flask

from dev.commands.send import send_command
from dev.commands.users import users
from runtime.cli import guarded
from runtime.commands.events import events


def register(app: Flask) -> None:
    """Add the local commands to the app's CLI (`send` to the `events` group)."""
    # `events` is guarded as a group: its invoke wraps every subcommand, `send` included.
    events.add_command(send_command)
    app.cli.add_command(guarded(users))
