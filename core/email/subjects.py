"""How a kind's subject line is kept under SUBJECT_LIMIT characters (each kind's module in
`core/email/kinds/` says its own subject)."""

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
