"""`flask --app main emails-preview`: render every e-mail kind with sample data to files."""

from __future__ import annotations

from pathlib import Path

import click

from config import Settings
from core.emails import KINDS, Brand, render, sample_props

PREVIEW_SITE = "https://acme.example.com"


def write_previews(out: Path, brand: Brand) -> list[Path]:
    """Render each kind's sample props to `<out>/<kind>.html` and `.txt`; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for kind in KINDS:
        content = render(kind, sample_props(kind), brand=brand)
        for suffix, body in ((".html", content.html), (".txt", content.text)):
            path = out / f"{kind}{suffix}"
            path.write_text(body, encoding="utf-8")
            written.append(path)
    return written


def preview_brand(settings: Settings) -> Brand:
    """The brand of the previews: the configured sender name and support address."""
    name = settings.email_from_admin.partition("<")[0].strip().strip('"')
    product = name.removesuffix(" Team").strip() or "Acme"
    site = str(settings.site_url) if settings.site_url else PREVIEW_SITE
    return Brand(product_name=product, site_url=site, support_email=settings.support_email)


@click.command("emails-preview")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("docs/emails"),
    show_default=True,
    help="Directory for the rendered .html and .txt files.",
)
def emails_preview(out: Path) -> None:
    """Render every transactional e-mail with sample data, for review and screenshots."""
    for path in write_previews(out, preview_brand(Settings())):
        click.echo(path)
