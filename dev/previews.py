"""`python -m dev.previews`: render every e-mail kind with sample data to files, under the
configured brand (BRAND_NAME, SUPPORT_EMAIL, SITE_URL, which the links are on), about the synced
catalogue's product when DATABASE_URL names a database that has one, in DATA_DIR/emails unless
told where."""

from __future__ import annotations

from pathlib import Path

import click
import psycopg

from adapters.db.pool import DatabaseUnavailable
from catalogue.rules import EmailProduct
from config import Settings
from emails.kind import SAMPLE_SITE
from emails.kinds import KINDS, sample_props
from emails.render import Brand, EmailContent, render
from emails.samples import catalogue_product
from runtime.container import Container, brand_for

GALLERY_INTRO = """# Transactional e-mails

Every kind rendered with its sample props (its module in `emails/kinds/`), for the brand
"{brand}", its links on {site}. Regenerate with `make emails-preview OUT=docs/emails` (plain
`make emails-preview` renders `.env`'s brand into `.data/emails`; both name the catalogue's
product while `make run` serves it): `python -m dev.previews` writes the `.html`, `.txt` and
this page, `dev/screenshot_emails.sh` takes the screenshots with headless Chromium.
"""


def write_previews(out: Path, brand: Brand, product: EmailProduct | None = None) -> list[Path]:
    """Render each kind's sample props (on the brand's site, about `product` when given) to
    `<out>/<kind>.html` and `.txt`, plus a gallery page."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    rendered: dict[str, EmailContent] = {}
    for kind in KINDS:
        props = sample_props(kind, brand.site_url, product)
        rendered[kind] = content = render(kind, props, brand=brand)
        for suffix, body in ((".html", content.html), (".txt", content.text)):
            written.append(out / f"{kind}{suffix}")
            written[-1].write_text(body, encoding="utf-8")
    gallery = out / "README.md"
    gallery.write_text(gallery_markdown(rendered, brand), encoding="utf-8")
    return [*written, gallery]


def gallery_markdown(rendered: dict[str, EmailContent], brand: Brand) -> str:
    """A markdown page showing each kind's subject and screenshot, linking both parts."""
    sections = [GALLERY_INTRO.format(brand=brand.product_name, site=brand.site_url)]
    for kind, content in rendered.items():
        links = f"[HTML]({kind}.html), [text]({kind}.txt)"
        image = f"![{kind}: {content.subject}]({kind}.png)"
        sections.append(f"## {kind}\n\nSubject: **{content.subject}** ({links})\n\n{image}\n")
    return "\n".join(sections)


def preview_brand(settings: Settings) -> Brand:
    """The brand of the previews: BRAND_NAME (else the admin sender's name), the support
    address, the site."""
    return brand_for(settings, default_site=SAMPLE_SITE)


def preview_product(settings: Settings) -> EmailProduct | None:
    """The synced catalogue's product (`products sync`) when DATABASE_URL names a database with
    one; None without (the samples name their own), said on stderr when it cannot be read."""
    if settings.database_url is None:
        return None
    container = Container(settings)
    try:
        return catalogue_product(container.db)
    except (DatabaseUnavailable, psycopg.Error) as exc:
        click.echo(f"the catalogue could not be read ({exc}): the samples' own product", err=True)
        return None
    finally:
        container.close()


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
    brand, product = preview_brand(settings), preview_product(settings)
    for path in write_previews(out or settings.data_dir / "emails", brand, product):
        click.echo(path)


if __name__ == "__main__":
    emails_preview()
