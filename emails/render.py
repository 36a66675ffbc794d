"""Transactional e-mail content: props in, subject + HTML + text out. No transport here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import css_inline
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import BaseModel

from core.brand import Brand
from core.money import format_amount
from emails.kinds import kind_of
from emails.props import DEFAULT_PATHS, EmailProps
from emails.subjects import SUBJECT_LIMIT

__all__ = ["SUBJECT_LIMIT", "Brand", "EmailContent", "format_amount", "render"]

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates" / "emails"

EN_DASH = "\u2013"


@dataclass(frozen=True)
class EmailContent:
    """A rendered e-mail, ready for any transport."""

    subject: str
    html: str
    text: str


def render(kind: str, props: BaseModel | Mapping[str, Any], *, brand: Brand) -> EmailContent:
    """Render one e-mail kind; a mapping is validated into the kind's props model first."""
    context = _context(kind, props, brand)
    html = _environment(html=True).get_template(f"{kind}.html").render(context)
    text = _environment(html=False).get_template(f"{kind}.txt").render(context)
    return EmailContent(subject=context["subject"], html=_inline(html), text=_tidy_text(text))


def _context(kind: str, props: BaseModel | Mapping[str, Any], brand: Brand) -> dict[str, Any]:
    registered = kind_of(kind)
    model = registered.props
    validated = props if isinstance(props, model) else model.model_validate(_as_mapping(props))
    filled = _fill_links(validated, brand)
    subject = registered.subject(filled, brand)
    return {"props": filled, "brand": brand, "subject": subject, "kind": kind}


def _as_mapping(props: BaseModel | Mapping[str, Any]) -> Mapping[str, Any]:
    # Another kind's model (or any model) is re-validated from its fields, never trusted as is.
    return props.model_dump() if isinstance(props, BaseModel) else props


def _fill_links(props: EmailProps, brand: Brand) -> EmailProps:
    missing = {
        field: brand.url(path)
        for field, path in DEFAULT_PATHS.items()
        if field in type(props).model_fields and getattr(props, field) is None
    }
    return props.model_copy(update=missing) if missing else props


# English month names whatever the process locale (strftime's %B follows LC_TIME).
_MONTHS = (
    *("January", "February", "March", "April", "May", "June"),
    *("July", "August", "September", "October", "November", "December"),
)


def _long_date(value: date) -> str:
    return f"{_MONTHS[value.month - 1]} {value.day}, {value.year}"


def _date_range(bounds: tuple[date, date]) -> str:
    start, end = bounds
    if start.year == end.year:
        return f"{_MONTHS[start.month - 1]} {start.day} {EN_DASH} {_long_date(end)}"
    return f"{_long_date(start)} {EN_DASH} {_long_date(end)}"


def _utc_time(value: datetime) -> str:
    """'15:30 UTC on November 21, 2026': a moment every reader can place."""
    moment = value.astimezone(UTC)
    return f"{moment:%H:%M} UTC on {_long_date(moment.date())}"


@cache
def _environment(*, html: bool) -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATE_DIR),
        autoescape=select_autoescape(enabled_extensions=("html",), default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # The templates ship with the code: no file is looked at again on each send (Jinja's
        # default checks every template's modification time, a tenth of a render).
        auto_reload=False,
        # HTML templates mark every value they print, so that CSS is inlined into the markup
        # around the values once per shape of e-mail, not once per send (see `_inline`).
        finalize=_mark if html else None,
    )
    env.filters["long_date"] = _long_date
    env.filters["date_range"] = _date_range
    env.filters["utc_time"] = _utc_time
    return env


# A printed value is wrapped in these private-use characters, which no e-mail needs (a value
# carrying them has them replaced); in the skeleton each value becomes its number between them.
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKED = re.compile(f"{_OPEN}(.*?){_CLOSE}", re.DOTALL)
_SLOT = re.compile(f"{_OPEN}(\\d+){_CLOSE}")


def _mark(value: Any) -> Any:
    # Markup is a macro's or caller's output: structure whose own values are marked inside it.
    if hasattr(value, "__html__"):
        return value
    # A plain string: autoescaping escapes it after this, and leaves the marks as they are.
    text = str(value)
    if _OPEN in text or _CLOSE in text:
        text = text.replace(_OPEN, "\ufffd").replace(_CLOSE, "\ufffd")
    return f"{_OPEN}{text}{_CLOSE}"


def _inline(marked: str) -> str:
    """The HTML with the style sheet's rules in style attributes.

    The markup without its values (the skeleton) depends only on the kind and the template's
    branches, so the inliner runs once per skeleton and the values go back into its slots. Each
    slot is numbered: a value the parser moves, copies or drops while repairing markup is moved,
    copied or dropped as inlining the whole page would.
    """
    values: list[str] = []

    def slot(match: re.Match[str]) -> str:
        values.append(match.group(1))
        return f"{_OPEN}{len(values) - 1}{_CLOSE}"

    inlined = _inlined_skeleton(_MARKED.sub(slot, marked))
    return _SLOT.sub(lambda match: values[int(match.group(1))], inlined)


@lru_cache(maxsize=512)
def _inlined_skeleton(skeleton: str) -> str:
    return _inliner().inline(skeleton)


@cache
def _inliner() -> css_inline.CSSInliner:
    # Media queries cannot be inlined; keep_at_rules leaves them in a <style> block.
    return css_inline.CSSInliner(keep_at_rules=True, load_remote_stylesheets=False)


def _tidy_text(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)) + "\n"
