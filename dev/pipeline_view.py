"""`make run`'s view of the pipeline at /_dev/pipeline (development only, never in the image).

The latest Stripe events, what each consumer made of them (the ledger), the e-mails they caused
(each a link to the HTML that was sent, read back from the outbox) and the dead letters: what a
founder would otherwise read out of logs and SQL.

A checkout's mails are keyed by its session, which the ledger does not keep: a checkout event's
session is read from its id (the success page's completion) or from Stripe (`GET /v1/events/{id}`;
the stand-in answers for the events it sent), once per event, since an event never changes.
"""

from __future__ import annotations

import email
import email.policy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask import Flask, Response, abort, render_template_string

from access.announcements import announced_ids
from access.checkouts import COMPLETION_PREFIX
from access.entitlements import STALE
from adapters.db.pool import Database
from adapters.mail.outbox import OutboxMailer
from adapters.stripe_api import (
    PaymentsNotConfigured,
    PaymentsUnavailable,
    StripeCallFailed,
    StripeGateway,
)
from runtime.container import Container
from support.service import held_dead_letters

PATH = "/_dev/pipeline"
# Ids of the events access publishes about a Stripe event (access/announcements.py): shown with it.
ANNOUNCEMENT_PREFIXES = tuple(announced_ids("")[1:])
LATEST = 50


@dataclass
class EventRow:
    """One event and what became of it."""

    event_id: str
    event_type: str
    created: datetime
    outcomes: dict[str, str] = field(default_factory=dict)
    emails: list[tuple[str, str, str]] = field(default_factory=list)  # (id, kind, recipient)
    ledger: bool = True  # False: a checkout session's row, for its mails (no outcomes)


@dataclass(frozen=True)
class DeadLetterRow:
    subscriber: str
    event_id: str
    event_type: str


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ brand }}: pipeline</title>
<meta http-equiv="refresh" content="5">
<style>
 body { font: 14px system-ui, sans-serif; margin: 2rem; color: #1f2328; }
 table { border-collapse: collapse; width: 100%; margin-bottom: 2rem; }
 th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #d0d7de; }
 th { background: #f6f8fa; } code { font-size: 12px; }
 .none { color: #8c959f; } .dead { color: #cf222e; }
</style></head><body>
<h1>{{ brand }}: pipeline</h1>
<p>Stripe events the subscribers recorded, newest first (the latest {{ limit }}); times in
UTC; refreshed every 5 s.</p>
<table id="events">
 <tr><th>event</th><th>type</th><th>created</th>
 {% for consumer in consumers %}<th>{{ consumer }}</th>{% endfor %}<th>e-mails</th></tr>
 {% for row in events %}
 <tr data-event="{{ row.event_id }}"><td><code>{{ row.event_id }}</code></td>
  <td>{{ row.event_type }}</td><td>{{ row.created.strftime("%Y-%m-%d %H:%M:%S") }}</td>
  {% for consumer in consumers %}
  <td class="{{ 'none' if consumer not in row.outcomes }}">
   {{ said(row.outcomes.get(consumer, "not yet")) if row.ledger else "" }}</td>{% endfor %}
  <td>{% for mail_id, kind, to in row.emails %}
   <a href="{{ base }}/emails/{{ mail_id }}/{{ kind }}">{{ kind }}</a> to {{ to }}<br>
  {% else %}<span class="none">none</span>{% endfor %}</td></tr>
 {% else %}
 <tr><td colspan="5" class="none">No events yet: try
  <code>uv run flask --app main events send checkout.session.completed</code></td></tr>
 {% endfor %}
</table>
<h2>Dead letters</h2>
<table id="dead-letters">
 <tr><th>subscriber</th><th>event</th><th>type</th></tr>
 {% for letter in dead %}
 <tr class="dead"><td>{{ letter.subscriber }}</td><td><code>{{ letter.event_id }}</code></td>
  <td>{{ letter.event_type }}</td></tr>
 {% else %}<tr><td colspan="3" class="none">None.</td></tr>{% endfor %}
</table>
<p>Replay them with <code>uv run flask --app main events replay-dead-letters</code>
(EVENT_BUS=pubsub).</p>
</body></html>
"""


# The ledger's words as a founder reads them: a `stale` change is one the grant already holds
# (or a newer one), as when the success page completes a checkout after Stripe's events did.
SAID = {STALE: "already applied"}


def said(outcome: str) -> str:
    return SAID.get(outcome, outcome)


# The checkout session of each of these events that is about one, where it can be learned.
SessionsOf = Callable[[Sequence[EventRow]], dict[str, str]]


def no_sessions(_: Sequence[EventRow]) -> dict[str, str]:
    return {}


def latest_events(
    db: Database, *, sessions: SessionsOf = no_sessions, limit: int = LATEST
) -> list[EventRow]:
    """The newest Stripe events in the ledger, every consumer's outcome, the e-mails sent
    about them (under their own id or an announcement's, a checkout's under its session:
    access/announcements.py)."""
    rows = db.fetch_all(
        "select e.event_id, e.event_type, e.event_created, p.consumer, p.outcome"
        " from (select event_id, min(event_type) as event_type,"
        "       min(event_created) as event_created, max(processed_at) as last"
        "       from public.processed_events where event_id not like all(%s)"
        "       group by event_id order by last desc limit %s) e"
        " join public.processed_events p using (event_id)"
        " order by e.last desc, p.consumer",
        ([_like(prefix) for prefix in ANNOUNCEMENT_PREFIXES], limit),
    )
    events: dict[str, EventRow] = {}
    for row in rows:
        entry = events.setdefault(
            row["event_id"], EventRow(row["event_id"], row["event_type"], row["event_created"])
        )
        entry.outcomes[row["consumer"]] = row["outcome"]
    session_of_event = sessions(list(events.values()))
    # The webhook's event and the success page's completion apply a checkout alike: its mail is
    # listed with the one applied first, whose announcement sent it (the other's found it sent).
    about: dict[str, str] = {}
    for event_id in reversed(events):
        for mail_id in announced_ids(event_id, session_of_event.get(event_id)):
            about.setdefault(mail_id, event_id)
    # A checkout's mails whose event is not listed, or whose session is unknown (an event made
    # up by `events send`, which Stripe never sent): the latest, on a row of their own, the
    # session's.
    sent = db.fetch_all(
        "select event_id, kind, recipient, sent_at from public.sent_emails"
        " where event_id = any(%s) or event_id like any(%s) order by sent_at",
        (list(about), [_like(prefix + "cs_") for prefix in ANNOUNCEMENT_PREFIXES]),
    )
    for row in sent[-limit:]:
        owner = about.get(row["event_id"])
        if owner is None:
            owner = row["event_id"].split("_", 1)[1]
            session = EventRow(owner, "checkout session", row["sent_at"], ledger=False)
            events.setdefault(owner, session)
        events[owner].emails.append((row["event_id"], row["kind"], row["recipient"]))
    return list(events.values())


class StripeSessions:
    """Each checkout event's session, from its id or asked of Stripe once (kept: an event never
    changes); while Stripe does not answer, none is learned and the rest are not asked."""

    KEPT = 20 * LATEST

    def __init__(self, stripe: StripeGateway) -> None:
        self._stripe = stripe
        self._known: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def __call__(self, rows: Sequence[EventRow]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._lock:
            if len(self._known) > self.KEPT:
                self._known.clear()
            for row in rows:
                if not row.event_type.startswith("checkout.session."):
                    continue
                if row.event_id.startswith(COMPLETION_PREFIX):
                    found[row.event_id] = row.event_id.removeprefix(COMPLETION_PREFIX)
                    continue
                if row.event_id not in self._known:
                    try:
                        self._known[row.event_id] = session_of(self._stripe.event(row.event_id))
                    except (PaymentsNotConfigured, PaymentsUnavailable, StripeCallFailed):
                        break
                if (session := self._known[row.event_id]) is not None:
                    found[row.event_id] = session
        return found


def session_of(event: dict[str, Any] | None) -> str | None:
    """The checkout session a Stripe event is about; None for one Stripe does not know."""
    obj = ((event or {}).get("data") or {}).get("object") or {}
    if obj.get("object") != "checkout.session" or not isinstance(obj.get("id"), str):
        return None
    session: str = obj["id"]
    return session


def _like(prefix: str) -> str:
    return prefix.replace("_", "\\_") + "%"


def consumers_of(events: Sequence[EventRow]) -> list[str]:
    return sorted({consumer for row in events for consumer in row.outcomes})


def dead_letters(container: Container) -> list[DeadLetterRow]:
    """What the bus gave up on: the in-process bus's list, or the dead-letter subscription's
    (read as the support API reads it, `support/service.py`)."""
    held = held_dead_letters(container.settings, container.bus)
    return [DeadLetterRow(name, event.id, event.type) for name, event in held]


def sent_html(mailer: object, *, event_id: str, kind: str) -> str | None:
    """The HTML of the e-mail sent for (event, kind), read back from the outbox."""
    if not isinstance(mailer, OutboxMailer):
        return None
    path = mailer.find(f"{event_id}/{kind}")
    if path is None or not path.exists():
        return None
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    part = message.get_body(preferencelist=("html",))
    return str(part.get_content()) if part is not None else None


def view_app(container: Container) -> Flask:
    """The page and the e-mails it links to, as a WSGI app to mount at PATH."""
    app = Flask(__name__)
    sessions = StripeSessions(container.stripe)

    @app.get("/")
    def index() -> str:
        events = latest_events(container.db, sessions=sessions)
        return render_template_string(
            PAGE,
            events=events,
            consumers=consumers_of(events),
            dead=dead_letters(container),
            base=PATH,
            said=said,
            limit=LATEST,
            brand=container.brand.product_name,
        )

    @app.get("/emails/<event_id>/<kind>")
    def sent(event_id: str, kind: str) -> Response:
        html = sent_html(container.mailer, event_id=event_id, kind=kind)
        if html is None:
            abort(404)
        return Response(html, mimetype="text/html")

    return app
