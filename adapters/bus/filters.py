"""The Pub/Sub filter of a subscription, from the event types its subscriber acts on (the
targets' filters are derived in `runtime.consumers`); Pub/Sub acknowledges the other messages
without delivering them.

`python -m runtime.consumers` prints the targets' filters, `<subscriber> <filter>` a line,
reading no setting (cloudbuild.yaml runs it in the image, which refuses to load the app without
production's settings); `flask --app main events filters` prints the same lines.

The filter reads the `event_type` attribute every publisher sets. It is fixed when the
subscription is created: a changed filter takes recreating the subscription (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Iterable

# Pub/Sub refuses longer filters.
FILTER_LIMIT_BYTES = 256


def message_filter(wanted: Iterable[str], among: Iterable[str]) -> str | None:
    """A filter admitting exactly `wanted` of the types `among` (all the bus carries); None when
    that is all of them.

    Types are grouped by their first word (`invoice.`, `app.`): a group wanted whole is one
    `hasPrefix` term, else each wanted type is named. Where what is refused is one term, the
    filter says `NOT` that, when shorter.
    """
    wanted, among = frozenset(wanted), frozenset(among)
    if unknown := wanted - among:
        raise ValueError(f"not on the bus: {', '.join(sorted(unknown))}")
    if not wanted:
        raise ValueError("a subscriber that wants no event needs no subscription")
    if wanted == among:
        return None
    admit, refuse = _terms(wanted, among), _terms(among - wanted, among)
    expression = " OR ".join(admit)
    if len(refuse) == 1 and len(f"NOT {refuse[0]}") < len(expression):
        expression = f"NOT {refuse[0]}"
    # A group wanted in part (all `customer.` but one `app.` type): refuse its prefix, name
    # the wanted few.
    partial = _excepting(wanted, among)
    if partial is not None and len(partial) < len(expression):
        expression = partial
    if len(expression.encode()) > FILTER_LIMIT_BYTES:
        raise ValueError(f"the filter is over Pub/Sub's {FILTER_LIMIT_BYTES} bytes: {expression}")
    return expression


def _terms(chosen: frozenset[str], among: frozenset[str]) -> list[str]:
    groups: dict[str, set[str]] = {}
    for event_type in among:
        groups.setdefault(event_type.split(".", 1)[0] + ".", set()).add(event_type)
    prefixes, named = [], []
    for prefix, members in sorted(groups.items()):
        if members <= chosen:
            prefixes.append(f'hasPrefix(attributes.event_type, "{prefix}")')
        elif 0 < len(members - chosen) < len(members & chosen):
            # Most of a group (every `app.` event but one): its prefix without the few.
            but = " AND ".join(
                f'NOT attributes.event_type = "{t}"' for t in sorted(members - chosen)
            )
            prefixes.append(f'(hasPrefix(attributes.event_type, "{prefix}") AND {but})')
        else:
            named += [f'attributes.event_type = "{t}"' for t in sorted(members & chosen)]
    return prefixes + named


def _excepting(wanted: frozenset[str], among: frozenset[str]) -> str | None:
    """`NOT hasPrefix(<group>) OR <named>` when a single group is not wanted whole: its wanted
    types named, every other group wanted whole."""
    groups: dict[str, set[str]] = {}
    for event_type in among:
        groups.setdefault(event_type.split(".", 1)[0] + ".", set()).add(event_type)
    short = [prefix for prefix, members in groups.items() if not members <= wanted]
    if len(short) != 1:
        return None
    named = sorted(groups[short[0]] & wanted)
    terms = [f'NOT hasPrefix(attributes.event_type, "{short[0]}")']
    return " OR ".join(terms + [f'attributes.event_type = "{t}"' for t in named])
