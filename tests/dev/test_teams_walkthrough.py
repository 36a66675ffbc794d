"""docs/teams.md's walk-through, command for command, against `make run`'s stack (dev/server.py):
a team made, 3 seats bought, Grace invited through the outbox's link, accepted, made an admin,
then left without a seat (and without the team's access) when the seats drop to one."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from adapters.db.pool import Database
from dev import pubsub_emulator
from tests.conftest import SETTINGS_VARIABLES
from tests.dev.test_walkthrough import run
from tests.helpers import wait_for
from tests.pubsub_fixtures import spawn

ROOT = Path(__file__).resolve().parents[2]


def blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "teams.md").read_text(), re.DOTALL)


def seats(db: Database) -> dict[str, tuple[str, bool]]:
    rows = db.fetch_all(
        "select p.email, m.role, m.has_seat from public.team_members m"
        " join public.profiles p on p.id = m.user_id"
    )
    return {r["email"]: (r["role"], r["has_seat"]) for r in rows}


def test_the_teams_walk_through_works_as_written(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    walk, after = blocks()
    port = pubsub_emulator.free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {
        "PORT": str(port),
        "DATABASE_URL": database_url,
        "DATA_DIR": str(data),
        "EMAIL_OUTBOX_DIR": str(data / "outbox"),
    }
    server = spawn([sys.executable, "-m", "dev.server"], env=env, port=port, log=tmp_path / "log")
    try:
        out = run(walk, data=data, port=port)
        assert len(re.findall(r" -> 200 ", out)) == 3, out
        assert '"role":"member"' in out.replace(" ", ""), out
        assert '"role":"admin"' in out.replace(" ", ""), out
        assert "'hasAccess': True, 'hasSeat': True" in out, out
        [product] = db.fetch_all(
            "select per_seat from public.products where stripe_price_id = 'price_demo_team_monthly'"
        )
        assert product["per_seat"] is True
        # Seats down to one: the owner keeps it, Grace (an admin now) stays without one.
        wait_for(
            lambda: (
                seats(db)
                == {"ada@example.com": ("owner", True), "grace@example.com": ("admin", False)}
            )
        )
        # The last block, in the same terminal: its variables as the walk set them.
        kept = [
            line
            for line in walk.splitlines()
            if line.startswith(("source ", "API=", "json()", "GRACE="))
        ]
        shown = run("\n".join([*kept, after]), data=data, port=port)
        assert "'hasAccess': False, 'hasSeat': False" in shown, shown
    finally:
        server.stop()
