"""The support API, /api/admin/...: a founder finds a customer and fixes what went wrong.

Guarded as a whole by `admin_only` (installed before every request of the app, so it runs
before routing answers 404 or 405): a caller who is not an admin (a guest, a bad token, a
user whose profile is not `is_admin`, or, while ADMIN_MFA is `required`, an admin whose token
lacks a second factor) gets the app's own 404 for every path under /api/admin, as for a route
that does not exist. An admin's every call is appended to the audit log before it runs.
"""

from __future__ import annotations

import logging
import re
import uuid
from datetime import datetime
from typing import Any, Literal, Protocol, cast
from urllib.parse import unquote

from flask import Blueprint, g, jsonify, request
from flask.blueprints import BlueprintSetupState
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict
from werkzeug.exceptions import HTTPException
from werkzeug.exceptions import NotFound as RouteNotFound

from access.subscriber import AccessSubscriber
from adapters.tokens import User
from api.caching import depends_on_caller
from api.deps import Collaborators, container
from api.identity import current_user
from api.operations import COMMON, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate
from core.addresses import digest_addresses
from core.errors import InvalidRequest, ServiceError, Unauthenticated
from support import service as support
from support.audit_store import Entry
from support.rules import searched
from support.service import Resends


class _Collaborators(Collaborators, Protocol):
    """What these routes use of the container beyond every domain's `Collaborators`."""

    @property
    def checkout_completion(self) -> AccessSubscriber: ...
    @property
    def email_resends(self) -> Resends: ...


def _container() -> _Collaborators:
    return cast("_Collaborators", container())


log = logging.getLogger(__name__)

bp = Blueprint("admin", __name__)


# Anyone but an admin (with a second factor unless ADMIN_MFA=off) gets 404, as for a route that
# does not exist.
ADMIN = {404: ErrorAnswer, **COMMON}

PREFIX = "/api/admin"
# Request details kept in the audit log, beside who, what, whom and why.
_HEADERS = ("User-Agent",)
# A change's fields kept beside its reason: what a comp gives, and until when.
_BODY = ("priceId", "until")


def in_admin_area(path: str) -> bool:
    """Whether a path is /api/admin or under it by any spelling a router or proxy might fold
    into it (doubled or trailing slashes, another case, encoded characters): each such spelling
    must be as missing as the route itself, or its 308 or 405 would tell a prober it exists."""
    decoded = path
    while "%" in decoded and unquote(decoded) != decoded:
        decoded = unquote(decoded)
    folded = "/" + "/".join(part for part in decoded.lower().split("/") if part)
    return folded == PREFIX or folded.startswith(PREFIX + "/")


def admin_only() -> None:
    """Let a request under /api/admin through only for an admin (see the module's docstring);
    record it in the audit log once let through."""
    if not in_admin_area(request.path):
        return
    c = container()
    try:
        user = current_user(
            authorization=request.headers.get("Authorization"),
            cookies=request.cookies,
            cookie_name=c.supabase_auth.cookie_name,
            tokens=c.tokens,
            db=c.db,
        )
    except Unauthenticated:
        user = None
    if (
        not support.is_admin(user, db=c.db, mfa_required=c.settings.admin_mfa == "required")
        or user is None
    ):
        raise RouteNotFound()
    depends_on_caller()
    g.admin = user
    support.record_call(c.db, _entry(user))


def _entry(user: User) -> Entry:
    # Kept for good, past a person's deletion: a searched name or address as its digest only,
    # and so is one typed where a customer's id goes (the route refuses it: 400), in the subject
    # and in the path alike.
    kept = {
        k: searched(str(v)) if k == "userId" else digest_addresses(str(v))
        for k, v in (request.view_args or {}).items()
    }
    subject_user = _user_id(kept["userId"]) if "userId" in kept else None
    args = {k: v for k, v in kept.items() if not (k == "userId" and subject_user is not None)}
    q = request.args.get("q")
    subject = next(iter(args.values()), None) or (searched(q) if q else None)
    query = "&".join(
        f"{digest_addresses(name)}={searched(value) if name == 'q' else digest_addresses(value)}"
        for name, value in request.args.items(multi=True)
    )
    return Entry(
        admin_id=user.id,
        admin_email=user.email,
        action=request.endpoint or "unknown",
        subject_user_id=subject_user,
        subject=subject[:1000] if subject else None,
        reason=_reason(),
        request={
            "method": request.method,
            "path": _path(kept),
            "query": query,
            "client": request.remote_addr,
            **{h.lower(): request.headers.get(h) for h in _HEADERS if h in request.headers},
            **({"body": body} if (body := _body()) else {}),
        },
    )


def _path(kept: dict[str, str]) -> str:
    """The request's path with each of its parameters as the log keeps it (an unknown path:
    with its addresses digested)."""
    rule = request.url_rule
    if rule is None:
        return digest_addresses(request.path)
    return re.sub(r"<(?:[^:<>]+:)?([^:<>]+)>", lambda m: kept.get(m.group(1), ""), rule.rule)


def _user_id(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def _body() -> dict[str, str | None]:
    """What a change asked for beyond its reason, as given (a comp's price and end): the row
    says what was given, not only that something was."""
    if request.method not in ("POST", "DELETE", "PATCH", "PUT"):
        return {}
    try:
        data = json_object()
    except (HTTPException, ServiceError):
        return {}
    kept: dict[str, str | None] = {}
    for name in _BODY:
        value = data.get(name, False)  # False: absent; a value of another type: refused anyway
        if value is None or isinstance(value, str):
            kept[name] = None if value is None else value[:200]
    return kept


def _reason() -> str | None:
    """The body's reason, as given, for the log (a bad body is refused by the route itself)."""
    if request.method not in ("POST", "DELETE", "PATCH", "PUT"):
        return None
    try:
        reason = json_object().get("reason")
    except (HTTPException, ServiceError):
        return None
    return reason[:1000] if isinstance(reason, str) else None


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CustomerSummary(_Answer):
    id: str
    email: str | None
    name: str | None
    hasAccess: bool  # now, a running comp included
    stripeAccess: bool  # from Stripe's grants alone (the profile's mirror)
    customerId: str | None
    createdAt: datetime


class CustomersAnswer(_Answer):
    items: list[CustomerSummary]
    nextCursor: str | None  # pass as `cursor` for the next page; None: the last page


class CustomersQuery(RequestModel):
    q: str  # an e-mail or a name (contained), a Stripe customer id or a user id (equal)
    limit: int | None = None
    cursor: str | None = None


class Person(_Answer):
    id: str
    email: str | None
    name: str | None
    isAdmin: bool
    hasAccess: bool
    stripeAccess: bool
    customerId: str | None
    createdAt: datetime


class TeamPlace(_Answer):
    name: str
    quantity: int | None
    role: str
    hasSeat: bool
    joinedAt: datetime


class AccountAnswer(_Answer):
    id: str
    kind: Literal["personal", "team"]
    customerId: str | None
    hasAccess: bool
    customers: list[str]
    team: TeamPlace | None


class GrantCause(_Answer):
    kind: Literal["comp", "stripe subscription", "stripe checkout"]
    at: datetime | None
    grantedBy: str | None = None  # a comp's admin
    reason: str | None = None  # a comp's reason
    subscription: str | None = None
    checkoutSession: str | None = None
    lastEvent: str | None = None  # the Stripe event that last changed it


class GrantAnswer(_Answer):
    id: str
    accountId: str
    kind: Literal["subscription", "purchase", "comp"]
    sourceId: str
    priceId: str | None
    product: str | None
    status: str
    active: bool  # now: a comp past its end is not
    currentPeriodEnd: datetime | None  # a comp's `until`
    endedAt: datetime | None
    teamId: str | None
    cause: GrantCause


class PurchaseAnswer(_Answer):
    id: str
    accountId: str | None
    checkoutSession: str
    customerId: str | None
    paymentIntent: str | None
    amountTotal: int | None
    currency: str | None
    paid: bool
    amountRefunded: int
    refundedAt: datetime | None
    product: str | None
    createdAt: datetime


class LedgerEvent(_Answer):
    id: str
    type: str
    consumer: str
    created: datetime
    processedAt: datetime
    outcome: str


class SentEmailAnswer(_Answer):
    id: str  # `<eventId>:<kind>`
    eventId: str
    kind: str
    recipient: str
    sentAt: datetime
    resentAt: datetime | None


class DeadLetterAnswer(_Answer):
    subscriber: str
    eventId: str
    type: str
    created: datetime
    appliedSince: str | None  # the ledger's outcome once replayed; None: never applied


class CustomerAnswer(_Answer):
    person: Person
    accounts: list[AccountAnswer]
    grants: list[GrantAnswer]
    purchases: list[PurchaseAnswer]
    events: list[LedgerEvent]
    emails: list[SentEmailAnswer]
    deadLetters: list[DeadLetterAnswer]


class ReplayAnswer(_Answer):
    eventId: str
    type: str
    outcome: str | None  # the ledger's; None while the access target has yet to apply it
    appliedBefore: bool  # the ledger had it already: nothing changed
    republished: bool  # handed to the bus for every subscriber (the e-mails) too


class ResendAnswer(_Answer):
    sentEmailId: str
    kind: str
    recipient: str


class Refunds(_Answer):
    count: int
    amount: int  # in the currency's smallest unit, as Stripe counts it


class MetricsAnswer(_Answer):
    mrr: dict[str, str]  # per currency, in major units, normalised to a month
    activeSubscriptions: int
    trials: int
    newLast30Days: int
    churnedLast30Days: int
    refundsLast30Days: dict[str, Refunds]
    computedAt: datetime


class AuditRow(_Answer):
    id: int
    at: datetime
    adminId: str
    adminEmail: str | None
    action: str
    subjectUserId: str | None
    subject: str | None
    reason: str | None
    request: dict[str, Any]


class AuditAnswer(_Answer):
    items: list[AuditRow]
    nextCursor: str | None


class FounderTask(_Answer):
    id: str
    kind: str  # stripe_redact_customer: redact the customer in the Stripe Dashboard
    subject: str  # what it is about: a Stripe customer id
    detail: str
    deletionId: str | None
    createdAt: datetime
    doneAt: datetime | None


class FounderTasksAnswer(_Answer):
    items: list[FounderTask]


class PageQuery(RequestModel):
    limit: int | None = None
    cursor: str | None = None


def _as(model: type[BaseModel], found: Any, status: int = 200) -> ResponseReturnValue:
    """The answer checked against its documented model, so the document cannot drift."""
    return jsonify(model.model_validate(found).model_dump(mode="json")), status


def current_admin() -> User:
    """The admin `admin_only` let through, for a route under /api/admin."""
    found: User = g.admin
    return found


@bp.record_once
def _install(state: BlueprintSetupState) -> None:
    state.app.before_request(admin_only)
    if state.app.extensions["container"].settings.admin_mfa != "required":
        # Never silently: a development setting, refused in production (config/supabase.py).
        log.warning("ADMIN_MFA=off: the support API lets admins in without a second factor")


def _int_arg(name: str) -> int | None:
    value = request.args.get(name)
    if value is None:
        return None
    if not value.isdigit():
        raise InvalidRequest(f"{name} must be a whole number ({name})")
    return int(value)


def _page(model: type[BaseModel], page: support.Page) -> ResponseReturnValue:
    return _as(model, {"items": page.items, "nextCursor": page.next_cursor})


@bp.get(f"{PREFIX}/customers")
@documented(
    "Admins: find people by e-mail, name, Stripe customer id or user id (paged)",
    {200: CustomersAnswer, **ADMIN},
    query=CustomersQuery,
    signed_in=True,
)
def customers() -> ResponseReturnValue:
    c = container()
    found = support.search(
        c.db,
        q=request.args.get("q", ""),
        limit=_int_arg("limit"),
        cursor=request.args.get("cursor"),
    )
    return _page(CustomersAnswer, found)


@bp.get(f"{PREFIX}/customers/<userId>")
@documented(
    "Admins: a person, their accounts, grants and causes, purchases, events, e-mails, dead letters",
    {200: CustomerAnswer, **ADMIN},
    signed_in=True,
)
def customer(userId: str) -> ResponseReturnValue:
    c = container()
    dead = support.held_dead_letters(c.settings, c.bus)
    return _as(CustomerAnswer, support.customer(c.db, support.user_id(userId), dead_letters=dead))


class CompRequest(RequestModel):
    priceId: str
    until: datetime | None
    reason: str


@bp.post(f"{PREFIX}/customers/<userId>/grants")
@documented(
    "Admins: a complimentary grant (kind comp) until a date or for good, with a reason",
    {201: GrantAnswer, **ADMIN},
    CompRequest,
    signed_in=True,
)
def give_comp(userId: str) -> ResponseReturnValue:
    c = container()
    data = json_object()
    reason = support.require_reason(data.get("reason"))
    body = validate(CompRequest, data)
    made = support.give_comp(
        c.db,
        user_id=support.user_id(userId),
        price_id=body.priceId,
        until=body.until,
        reason=reason,
        admin=current_admin(),
    )
    return _as(GrantAnswer, made, 201)


class ReasonRequest(RequestModel):
    reason: str


def reason_body() -> str:
    """A change's body: its `reason`, or a 400 naming it (the audit row has it already)."""
    data = json_object()
    reason = support.require_reason(data.get("reason"))
    validate(ReasonRequest, data)
    return reason


@bp.delete(f"{PREFIX}/grants/<grantId>")
@documented(
    "Admins: end a comp (a Stripe grant: 409, it ends in Stripe), with a reason",
    {200: GrantAnswer, 409: ErrorAnswer, **ADMIN},
    ReasonRequest,
    signed_in=True,
)
def end_grant(grantId: str) -> ResponseReturnValue:
    c = container()
    reason_body()
    return _as(GrantAnswer, support.end_grant(c.db, grantId))


@bp.post(f"{PREFIX}/events/<eventId>/replay")
@documented(
    "Admins: fetch an event from Stripe and apply it (the ledger keeps it once)",
    {200: ReplayAnswer, 409: ErrorAnswer, **ADMIN},
    ReasonRequest,
    signed_in=True,
)
def replay(eventId: str) -> ResponseReturnValue:
    c = _container()
    reason_body()
    return _as(
        ReplayAnswer,
        support.replay(
            event_id=eventId,
            stripe=c.stripe,
            db=c.db,
            access=c.checkout_completion,
            bus=c.bus,
        ),
    )


@bp.post(f"{PREFIX}/emails/<sentEmailId>/resend")
@documented(
    "Admins: send a sent e-mail again, once (`<eventId>:<kind>`), with a reason",
    {200: ResendAnswer, 202: ResendAnswer, 409: ErrorAnswer, **ADMIN},
    ReasonRequest,
    signed_in=True,
)
def resend(sentEmailId: str) -> ResponseReturnValue:
    reason_body()
    done = support.resend(
        _container().email_resends, sent_email_id=sentEmailId, admin=current_admin()
    )
    # 202: the emails target sends it (the Pub/Sub design, where the api holds no Resend key).
    return _as(ResendAnswer, done.answer, 202 if done.handed_over else 200)


@bp.get(f"{PREFIX}/metrics")
@documented(
    "Admins: MRR per currency, subscriptions, trials, new, churned, refunds",
    {200: MetricsAnswer, **ADMIN},
    signed_in=True,
)
def metrics() -> ResponseReturnValue:
    return _as(MetricsAnswer, support.metrics(container().db))


@bp.get(f"{PREFIX}/audit")
@documented(
    "Admins: the audit log, newest first (paged)",
    {200: AuditAnswer, **ADMIN},
    query=PageQuery,
    signed_in=True,
)
def audit() -> ResponseReturnValue:
    c = container()
    return _page(
        AuditAnswer,
        support.audit_page(c.db, limit=_int_arg("limit"), cursor=request.args.get("cursor")),
    )


@bp.get(f"{PREFIX}/tasks")
@documented(
    "Admins: what the founder must do by hand (a Stripe customer to redact), not done",
    {200: FounderTasksAnswer, **ADMIN},
    signed_in=True,
)
def founder_tasks() -> ResponseReturnValue:
    return _as(FounderTasksAnswer, {"items": support.founder_tasks(container().db)})


@bp.post(f"{PREFIX}/tasks/<taskId>/done")
@documented(
    "Admins: a founder task done by hand, with a reason",
    {200: FounderTask, **ADMIN},
    ReasonRequest,
    signed_in=True,
)
def finish_founder_task(taskId: str) -> ResponseReturnValue:
    c = container()
    reason_body()
    return _as(FounderTask, support.finish_founder_task(c.db, taskId))
