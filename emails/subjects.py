"""How a kind's subject line is kept under SUBJECT_LIMIT characters (each kind's module in
`emails/kinds/` says its own subject)."""

from __future__ import annotations

# Longer subjects are cut in most inboxes' lists.
SUBJECT_LIMIT = 49


def _truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if space >= width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-(/\u2013\u2014") + "\u2026"


def fit(prefix: str, value: str, suffix: str = "") -> str:
    """`prefix + value + suffix`, the value shortened (at a word, with an ellipsis) to fit."""
    return prefix + _truncate(value, SUBJECT_LIMIT - len(prefix) - len(suffix)) + suffix


def fits(subject: str) -> bool:
    """Whether the subject is short enough as it is."""
    return len(subject) <= SUBJECT_LIMIT


# A subject quoting what someone wrote names them first and whole (a cut address could read as
# another one's), so it may run past SUBJECT_LIMIT: the inbox cuts its end, never the name. It
# keeps to this by leaving out what it can do without, never by cutting the address or the quote.
ATTRIBUTED_SUBJECT_LIMIT = 120


def first_fitting(*subjects: str) -> str:
    """The first of `subjects` (fullest first) within ATTRIBUTED_SUBJECT_LIMIT; else the last."""
    return next((s for s in subjects if len(s) <= ATTRIBUTED_SUBJECT_LIMIT), subjects[-1])
