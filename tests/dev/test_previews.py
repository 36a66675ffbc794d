"""`make emails-preview` (dev/previews.py): the configured brand, written outside the tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from core.email.kinds import KINDS
from dev.previews import emails_preview


def test_previews_follow_brand_name_and_land_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deploy guide's sender: its display name is a person's, not the brand.
    monkeypatch.setenv("EMAIL_FROM_ADMIN", "Marc at Acme <marc@mail.example.com>")
    monkeypatch.setenv("BRAND_NAME", "Initech")
    monkeypatch.setenv("SUPPORT_EMAIL", "help@initech.example")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))

    result = CliRunner().invoke(emails_preview, [])

    assert result.exit_code == 0, result.output
    out = tmp_path / "data" / "emails"
    assert sorted(p.name for p in out.glob("*.txt")) == sorted(f"{k}.txt" for k in KINDS)
    welcome = (out / "new-signup.txt").read_text()
    assert "Welcome to Initech" in welcome
    for path in [*out.glob("*.html"), *out.glob("*.txt")]:
        text = path.read_text()
        assert "Marc at Acme" not in text, path.name
        assert "Initech" in text, path.name
        assert "help@initech.example" in text, path.name


def test_without_brand_name_the_sender_name_minus_team_is_the_brand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMAIL_FROM_ADMIN", "Globex Team <hello@globex.example>")

    result = CliRunner().invoke(emails_preview, ["--out", str(tmp_path / "out")])

    assert result.exit_code == 0, result.output
    assert "Welcome to Globex" in (tmp_path / "out" / "new-signup.txt").read_text()
