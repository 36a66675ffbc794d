"""`make demo` end to end: its driver in a process of its own, as `make demo` runs it, on a
fresh embedded Postgres; the whole loop must hold and leave what it printed behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import get_args

import pytest

from config.stripe import StripeSettings
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD, postgres_home

ROOT = Path(__file__).resolve().parents[2]


def run_demo(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {"DATA_DIR": str(tmp_path / "data"), "EMAIL_OUTBOX_DIR": str(tmp_path / "outbox")}
    env |= settings
    return subprocess.run(
        [sys.executable, "-m", "dev.demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )


def subjects(outbox: Path) -> dict[str, str]:
    found = {}
    for path in sorted(outbox.glob("*.eml")):
        with path.open("rb") as file:
            found[str(path)] = str(BytesParser(policy=policy.default).parse(file)["Subject"])
    return found


@pytest.fixture
def home() -> Iterator[Path]:
    """The demo's DATA_DIR (its embedded Postgres lives there) and outbox."""
    with postgres_home() as path:
        yield path


# Each run of the demo costs seconds of a whole stack: the settings each run covers are named
# here, and every `CHECKOUT_TAX` setting is covered by one of them.
TAX_SETTINGS = get_args(StripeSettings.model_fields["checkout_tax"].annotation)
WHOLE_LOOP_TAX = "none"
SECOND_RUN_TAX = "managed_payments"
OTHER_TAX = [tax for tax in TAX_SETTINGS if tax not in {WHOLE_LOOP_TAX, SECOND_RUN_TAX}]


def test_every_checkout_tax_setting_has_a_run() -> None:
    assert {WHOLE_LOOP_TAX, SECOND_RUN_TAX, *OTHER_TAX} == set(TAX_SETTINGS)
    assert StripeSettings.model_fields["checkout_tax"].default == WHOLE_LOOP_TAX


@pytest.mark.parametrize("bus", ["inline", "pubsub"])
def test_make_demo_runs_the_whole_loop_and_exits_0(home: Path, bus: str) -> None:
    # Even with secrets of real accounts in the environment, the demo stays offline.
    done = run_demo(home, EVENT_BUS=bus, RESEND_API_KEY="re_must_not_be_used")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    assert re.search(r"Starting the embedded Postgres in .*\n  done in \d+\.\d s", out)
    steps = re.findall(r"^\[(\d)/5\] ", out, re.MULTILINE)
    assert steps == ["1", "2", "3", "4", "5"]
    assert re.findall(r"has_access  (true|false)", out) == ["true", "true", "false"]
    assert len(re.findall(r"event       evt_[0-9a-f]{24}", out)) == 3
    assert re.findall(r"webhook     (\d+)", out) == ["200", "200", "200"]
    printed = re.findall(r"^\s+(/\S+\.eml)$", out, re.MULTILINE)
    written = subjects(home / "outbox")
    assert sorted(printed) == sorted(written)
    invitations = [s for s in written.values() if " invited you to " in s]
    assert sorted(s for s in written.values() if s not in invitations) == [
        "Order confirmed: Demo Metered",
        "Order confirmed: Demo Pack",
        "Order confirmed: Team Monthly",
        "Order confirmed: Team Monthly",  # the team's 3 seats
        "Receipt: $19.00 for Team Monthly",
        "Receipt: $9.00 for Demo Metered",
        "Subscription ended: Team Monthly",
        "Your generations credits are used up",  # the pack's
        "Your generations credits are used up",  # the plan's
    ]
    # A pack consumed to 402; a plan on a meter consumed past its credits, the 3 over reported.
    assert re.search(r"^\[credits\] pack: 5 generations granted; 6 consumptions answered"
                     r" 200, 200, 200, 200, 200, 402$", out, re.MULTILINE)  # fmt: skip
    assert re.search(r"overage     3 generations reported to meter demo_generations_overage: "
                     r"\S+-3, \S+-4, \S+-5$", out, re.MULTILINE)  # fmt: skip
    # Each names the owner who invited, by address, and quotes the team's name.
    assert len(invitations) == 2
    for subject in invitations:
        assert re.fullmatch(
            r'(.+ \()?demo-\S+@example\.com\)? invited you to the team "Demo Team" on .+', subject
        ), subject
    assert re.search(r"^\[team 2/4\] 3 seats bought \S+: seats 3, used 1$", out, re.MULTILINE)
    members = re.findall(r"^\[team [34]/4\] \S+ invited \(member\), accepted \(member\):"
                         r" has_access (true|false)$", out, re.MULTILINE)  # fmt: skip
    assert members == ["true", "true"]
    assert re.search(r"Demo passed in \d+\.\d s", out)
    email = re.search(r"users show (demo-\S+@example\.com)", out)
    assert email, out
    if bus == "pubsub":
        assert "Pub/Sub emulator on 127.0.0.1:" in out
        # The targets check push tokens: access was granted through Cloud Run's front.
        assert len(re.findall(r"target on \S+ behind Cloud Run's front on http", out)) == 2
        return
    # The same database again, as a founder runs `make demo` twice, under another tax setting.
    again = run_demo(home, CHECKOUT_TAX=SECOND_RUN_TAX)
    passes_under_the_tax_setting(again, home, SECOND_RUN_TAX)
    sessions = [
        re.findall(r"purchase    (cs_test_local_[0-9a-f]{24}) paid", run.stdout)
        for run in (done, again)
    ]
    assert [len(found) for found in sessions] == [1, 1]
    assert sessions[0] != sessions[1], "a new checkout id after a restart"


@pytest.mark.parametrize("tax", OTHER_TAX)
def test_make_demo_passes_under_each_checkout_tax_setting(home: Path, tax: str) -> None:
    passes_under_the_tax_setting(run_demo(home, CHECKOUT_TAX=tax), home, tax)


def passes_under_the_tax_setting(
    done: subprocess.CompletedProcess[str], home: Path, tax: str
) -> None:
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    assert re.findall(r"^\[(\d)/5\] ", out, re.MULTILINE) == ["1", "2", "3", "4", "5"]
    # The credits' pack and plan were sold too: each product the demo makes can be sold under
    # the setting (Managed Payments sells only products with an eligible tax code).
    assert re.search(r"^\[credits\] pack: 5 generations granted; 6 consumptions answered"
                     r" 200, 200, 200, 200, 200, 402$", out, re.MULTILINE)  # fmt: skip
    assert re.search(r"^\[credits\] plan: 3 generations granted", out, re.MULTILINE)
    assert re.search(r"Demo passed in \d+\.\d s", out)
    if tax == "stripe_tax":
        shows_the_tax_it_charged(out, home / "outbox")


def shows_the_tax_it_charged(out: str, outbox: Path) -> None:
    # The stand-in's 19% on the $19.00 monthly price, added on top.
    assert "      tax         $3.61 on $19.00 (Stripe Tax" in out
    written = subjects(outbox)
    assert "Receipt: $22.61 for Team Monthly" in written.values()
    [confirmation] = [
        path
        for path, subject in written.items()
        if subject == "Order confirmed: Team Monthly" and "$3.61" in Path(path).read_text()
    ]
    with Path(confirmation).open("rb") as file:
        message = BytesParser(policy=policy.default).parse(file)
    text = message.get_body(preferencelist=("plain",))
    assert text is not None
    lines = [" ".join(line.split()) for line in str(text.get_content()).splitlines()]
    assert [line for line in lines if line.startswith(("Subtotal:", "Tax:", "Total paid:"))] == [
        "Subtotal: $19.00",
        "Tax: $3.61",
        "Total paid: $22.61",
    ]
