"""`python -m dev.previews`: render every e-mail kind with sample data to files."""

from __future__ import annotations

from pathlib import Path

import click

from config import Settings
from core.email.kinds import KINDS, sample_props
from core.email.render import Brand, EmailContent, render
from runtime.container import brand_for

PREVIEW_SITE = "https://acme.example.com"
GALLERY_INTRO = """# Transactional e-mails

Every kind rendered with its sample props (its module in `core/email/kinds/`). Regenerate with
`make emails-preview`: `python -m dev.previews` writes the `.html`, `.txt` and this page,
`dev/screenshot_emails.sh` takes the screenshots with headless Chromium.
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
    gallery.write_text(gallery_markdown(rendered), encoding="utf-8")
    return [*written, gallery]


def gallery_markdown(rendered: dict[str, EmailContent]) -> str:
    """A markdown page showing each kind's subject and screenshot, linking both parts."""
    sections = [GALLERY_INTRO]
    for kind, content in rendered.items():
        links = f"[HTML]({kind}.html), [text]({kind}.txt)"
        image = f"![{kind}: {content.subject}]({kind}.png)"
        sections.append(f"## {kind}\n\nSubject: **{content.subject}** ({links})\n\n{image}\n")
    return "\n".join(sections)


def preview_brand(settings: Settings) -> Brand:
    """The brand of the previews: the configured sender's name and the support address."""
    return brand_for(settings, default_site=PREVIEW_SITE)


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


if __name__ == "__main__":
    emails_preview()
