"""The README's quick start, command for command, against `make run`'s stack (dev/server.py):
the buyer is signed in, so her first mail is the purchase confirmation, never a guest's
sign-in link; her checkout made through the API, paid on the Stripe stand-in's page and
completed from the success page with the session id its link back carries gives her access at
once; and `make run`'s banner suggests the same commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from adapters.db.pool import Database
from dev import pubsub_emulator
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD, wait_for
from tests.pubsub_fixtures import spawn

ROOT = Path(__file__).resolve().parents[2]
EMAIL = "ada@example.com"


def quick_start() -> list[str]:
    """The bash blocks of the README's "Quick start"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.DOTALL)


def commands(block: str) -> list[str]:
    """Each command of a block, continuation lines joined, comments left out."""
    joined = block.replace("\\\n", " ")
    return [" ".join(line.split("  #")[0].split()) for line in joined.splitlines() if line]


def run(block: str, *, data: Path, port: int) -> str:
    """The block in bash as a second terminal runs it, on this test's data directory and port."""
    script = block.replace(".data/", f"{data}/").replace("localhost:8080", f"localhost:{port}")
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout


def kinds_sent(db: Database) -> list[str]:
    rows = db.fetch_all("select kind from public.sent_emails where recipient = %s", (EMAIL,))
    return sorted(r["kind"] for r in rows)


def purchases(db: Database) -> list[str]:
    rows = db.fetch_all(
        "select pr.name from public.purchases pu join public.products pr on pr.id = pu.product_id"
        " join public.profiles p on p.id = pu.user_id where p.email = %s order by pr.name",
        (EMAIL,),
    )
    return [r["name"] for r in rows]


def test_the_quick_start_signs_the_buyer_in_and_every_command_works(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    walkthrough, frontend = quick_start()
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
        out = run(walkthrough, data=data, port=port)
        assert len(re.findall(r" -> 200 ", out)) == 3, out
        assert "has_access  " in out
        assert re.search(r"\S+\.eml", out), "ls lists the purchase confirmation"
        wait_for(lambda: kinds_sent(db) == ["purchase-confirmation", "subscription-cancelled"])
        assert purchases(db) == ["Team Monthly"]

        # The frontend's way, in the same terminal (`source .data/run.env` done): the checkout
        # through the API, Pay posted on the stand-in's page, then the success page's call with
        # the session id the page's link back carries.
        source = walkthrough.splitlines()[0]
        assert source.startswith("source .data/run.env")
        *_, body, status = run(source + "\n" + frontend, data=data, port=port).splitlines()
        assert status == "200", body
        completed = json.loads(body)
        # Access at once, from the product just paid (the monthly plan was cancelled above).
        assert completed["hasAccess"] is True, body
        active = [e["product"]["name"] for e in completed["entitlements"] if e["active"]]
        assert active == ["Pro Repository"], body
        assert purchases(db) == ["Pro Repository", "Team Monthly"]
        wait_for(lambda: len(kinds_sent(db)) == 3)
        # Signed in every time: no guest's sign-in link.
        assert kinds_sent(db) == [
            "purchase-confirmation",
            "purchase-confirmation",
            "subscription-cancelled",
        ]
        banner = server.output()
    finally:
        server.stop()
    suggested = [c for c in commands(banner) if c.startswith("uv run flask")]
    documented = commands(walkthrough) + commands(frontend)
    assert suggested, banner
    for command in suggested:
        assert any(command in line for line in documented), command
