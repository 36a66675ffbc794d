"""`make emails-preview` (dev/previews.py): the configured brand, its links on SITE_URL, about the
synced catalogue's product, written outside the tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.db.pool import Database
from dev.previews import emails_preview
from dev.samples.catalogue import seed_demo_products
from emails.kinds import KINDS


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


def test_previews_link_to_site_url_and_name_the_synced_catalogues_product(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Database, database_url: str
) -> None:
    seed_demo_products(db)  # as `products sync` writes it: "Pro Repository" is featured
    monkeypatch.setenv("SITE_URL", "https://shop.example.org")
    monkeypatch.setenv("DATABASE_URL", database_url)

    result = CliRunner().invoke(emails_preview, ["--out", str(tmp_path)])

    assert result.exit_code == 0, result.output
    for path in [*tmp_path.glob("*.html"), *tmp_path.glob("*.txt")]:
        text = path.read_text()
        assert "acme.example.com" not in text, path.name
        assert "/dashboard/billing" not in text, path.name
    for kind in KINDS:
        assert "https://shop.example.org" in (tmp_path / f"{kind}.html").read_text(), kind
    # The mails that name a product name the catalogue's, as a real mail about it would.
    confirmation = (tmp_path / "purchase-confirmation.txt").read_text()
    assert "Pro Repository" in confirmation
    assert "example-org/saas-starter-pro" in confirmation
    assert "Starter Kit Pro" not in confirmation  # the sample's own product
    assert "Pro Repository" in (tmp_path / "payment-failed.txt").read_text()
    assert "https://shop.example.org/dashboard" in (tmp_path / "payment-failed.txt").read_text()


def test_without_a_catalogue_the_previews_name_the_samples_product(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Database, database_url: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)

    result = CliRunner().invoke(emails_preview, ["--out", str(tmp_path)])

    assert result.exit_code == 0, result.output
    assert "Starter Kit Pro" in (tmp_path / "purchase-confirmation.txt").read_text()
    # No SITE_URL: the sample shop's.
    assert "https://acme.example.com/dashboard" in (tmp_path / "payment-failed.html").read_text()
