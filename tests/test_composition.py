"""The composition root builds each collaborator once and nothing at import."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from container import once

ROOT = Path(__file__).resolve().parent.parent


class Slow:
    built = 0

    @once
    def thing(self) -> object:
        type(self).built += 1
        time.sleep(0.05)  # widen the race window: the assertion is about the lock, not time
        return object()


def test_racing_threads_build_a_collaborator_once() -> None:
    holder = Slow()
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(holder.thing)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Slow.built == 1
    assert len({id(x) for x in seen}) == 1


def test_importing_main_dials_nothing() -> None:
    # No Postgres, Stripe, Pub/Sub or Resend client may exist after a bare import.
    code = (
        "import sys, main\n"
        "c = main.container\n"
        "names = ('db', 'stripe', 'bus', 'mailer', 'accounts', 'github')\n"
        "built = [n for n in names if n in vars(c)]\n"
        "loaded = [m in sys.modules for m in ('google.cloud.pubsub_v1', 'resend')]\n"
        "print(built, c._embedded, *loaded)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "EVENT_BUS": "pubsub"},
    )
    assert out.stdout.strip().splitlines()[-1] == "[] None False False"
