"""`python -m dev.previews`: render every e-mail kind with sample data to files, under the
configured brand (BRAND_NAME, SUPPORT_EMAIL, SITE_URL), in DATA_DIR/emails unless told where."""

from __future__ import annotations

from pathlib import Path

import click

from config import Settings
from core.email.kinds import KINDS, sample_props
from core.email.render import Brand, EmailContent, render
from runtime.container import brand_for

PREVIEW_SITE = "https://acme.example.com"
GALLERY_INTRO = """# Transactional e-mails

Every kind rendered with its sample props (its module in `core/email/kinds/`), for the brand
"{brand}". Regenerate with `make emails-preview OUT=docs/emails` (plain `make emails-preview`
renders `.env`'s brand into `.data/emails`): `python -m dev.previews` writes the `.html`, `.txt`
and this page, `dev/screenshot_emails.sh` takes the screenshots with headless Chromium.
"""


def write_previews(out: Path, brand: Brand) -> list[Path]:
    """Render each kind's sample props to `<out>/<kind>.html` and `.txt`, plus a gallery page."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    rendered: dict[str, EmailContent] = {}
    for kind in KINDS:
        rendered[kind] = content = render(kind, sample_props(kind), brand=brand)
        for suffix, body in ((".html", content.html), (".txt", content.text)):
            written.append(out / f"{kind}{suffix}")
            written[-1].write_text(body, encoding="utf-8")
    gallery = out / "README.md"
    gallery.write_text(gallery_markdown(rendered, brand), encoding="utf-8")
    return [*written, gallery]


def gallery_markdown(rendered: dict[str, EmailContent], brand: Brand) -> str:
    """A markdown page showing each kind's subject and screenshot, linking both parts."""
    sections = [GALLERY_INTRO.format(brand=brand.product_name)]
    for kind, content in rendered.items():
        links = f"[HTML]({kind}.html), [text]({kind}.txt)"
        image = f"![{kind}: {content.subject}]({kind}.png)"
        sections.append(f"## {kind}\n\nSubject: **{content.subject}** ({links})\n\n{image}\n")
    return "\n".join(sections)


def preview_brand(settings: Settings) -> Brand:
    """The brand of the previews: BRAND_NAME (else the admin sender's name), the support
    address, the site."""
    return brand_for(settings, default_site=PREVIEW_SITE)


@click.command("emails-preview")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the rendered .html and .txt files [default: DATA_DIR/emails, outside"
    " the tracked tree; docs/emails is the gallery].",
)
def emails_preview(out: Path | None) -> None:
    """Render every transactional e-mail with sample data, for review and screenshots."""
    settings = Settings()
    for path in write_previews(out or settings.data_dir / "emails", preview_brand(settings)):
        click.echo(path)


if __name__ == "__main__":
    emails_preview()
