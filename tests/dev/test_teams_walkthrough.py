"""docs/teams.md's walk-through, command for command, against `make run`'s stack (dev/server.py),
as a founder types it: a team made through the API, 3 seats bought by a checkout paid on the
Stripe stand-in's page and completed from the success page with the session id its link back
carries, Grace and Alan invited through the outbox's links and accepted, Grace made an admin,
then the seats set to 2 through the API: a change at the period's end, scheduled, that leaves all
three their seats until then. Nothing is sent by hand: every event is the stand-in's."""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from adapters.db.pool import Database
from dev import pubsub_emulator
from tests.conftest import SETTINGS_VARIABLES
from tests.dev.test_walkthrough import run
from tests.pubsub_fixtures import spawn

ROOT = Path(__file__).resolve().parents[2]


def walk() -> str:
    [block] = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "teams.md").read_text(), re.DOTALL)
    return str(block)


def seats(db: Database) -> dict[str, tuple[str, bool]]:
    rows = db.fetch_all(
        "select p.email, m.role, m.has_seat from public.team_members m"
        " join public.profiles p on p.id = m.user_id"
    )
    return {r["email"]: (r["role"], r["has_seat"]) for r in rows}


def printed(out: str) -> list[Any]:
    """What the walk's `json` helper printed (Python literals), in order; other lines skipped."""
    return [ast.literal_eval(line) for line in out.splitlines() if line.startswith(("[", "{'"))]


def only_team(teams: list[dict[str, Any]]) -> dict[str, Any]:
    [team] = teams
    return team


def test_the_walk_is_what_a_founder_does_nothing_sent_by_hand() -> None:
    block = walk()
    assert "events send" not in block
    assert "/v1/" not in block, "the catalogue is per seat already: nothing changed at Stripe"
    assert "products sync" not in block
    assert "/api/payments/complete-checkout" in block
    assert "/seats" in block


def test_the_teams_walk_through_works_as_written(
    database_url: str, db: Database, tmp_path: Path
) -> None:
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
        out = run(walk(), data=data, port=port)
    finally:
        server.stop()

    completed, bought, alan_seated, ada_entitlements = printed(out)
    # Paid on the page, completed from the success page: Ada's GET /api/me, the team's access.
    ada = only_team(completed)
    assert (ada["name"], ada["role"], ada["hasAccess"], ada["hasSeat"]) == (
        "Analytical Engines",
        "owner",
        True,
        True,
    ), out
    assert bought == {"total": 3, "used": 1}, out
    compact = out.replace(" ", "")
    assert compact.count('"role":"member"') == 4, out  # two invitations, two acceptances
    assert '"role":"admin"' in compact, out
    alan = only_team(alan_seated)
    assert (alan["hasAccess"], alan["hasSeat"]) == (True, True), out
    # PATCH .../seats {"quantity": 2}: 200; fewer seats wait for the period's end, so the
    # seats it answers are the three held until then.
    lowered = re.search(r"^(\{.*\})\n(\d{3})$", out, re.MULTILINE)
    assert lowered is not None, out
    assert (json.loads(lowered.group(1)), lowered.group(2)) == ({"total": 3, "used": 3}, "200")
    # The change is scheduled on the team's grant, and until then nobody loses a seat.
    scheduled = [e["scheduledChange"] for e in ada_entitlements if e.get("scheduledChange")]
    assert [change["quantity"] for change in scheduled] == [2], out
    assert seats(db) == {
        "ada@example.com": ("owner", True),
        "grace@example.com": ("admin", True),
        "alan@example.com": ("member", True),
    }
