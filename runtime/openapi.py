"""GET /api/openapi.json: the OpenAPI 3.1 document of the public routes, from the pydantic
models the handlers validate with (requests) and answer with (responses)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from flask import Blueprint, current_app, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from accounts.leads_routes import LeadRequest, RemovalQuery
from accounts.leaving_routes import DeleteAccountRequest, DeletionAnswer, ExportAnswer
from accounts.routes import MeAnswer
from billing.completion_routes import CompletionAnswer, CompletionRequest
from billing.plan_routes import (
    CancelAnswer,
    CancelRequest,
    ChangeRequest,
    PreviewAnswer,
    PreviewRequest,
    ResumeAnswer,
    ResumeRequest,
    StalePreviewAnswer,
)
from billing.routes import CheckoutRequest, PortalRequest
from credits.routes import (
    CheckAnswer,
    CheckRequest,
    NotEnoughAnswer,
    UsageAnswer,
    UsageRequest,
)
from emails.sample_routes import SampleEmailQuery
from github_access.routes import AccessRequest
from support.routes import (
    AuditAnswer,
    CompRequest,
    CustomerAnswer,
    CustomersAnswer,
    CustomersQuery,
    FounderTask,
    FounderTasksAnswer,
    GrantAnswer,
    MetricsAnswer,
    PageQuery,
    ReasonRequest,
    ReplayAnswer,
    ResendAnswer,
)
from teams.routes import (
    AcceptAnswer,
    AcceptRequest,
    CreateTeamRequest,
    InvitationAnswer,
    InvitationRequest,
    InvitedAnswer,
    RoleAnswer,
    RoleRequest,
    SeatsAnswer,
    SeatsRequest,
    TeamAnswer,
    TeamDetailAnswer,
)

bp = Blueprint("openapi", __name__)


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorAnswer(Answer):
    error: str


class SuccessAnswer(Answer):
    success: bool


class UrlAnswer(Answer):
    url: str | None


class EmptyAnswer(Answer):
    pass


class HealthAnswer(Answer):
    status: str


class CreditGrant(Answer):
    feature: str
    amount: int
    # `period`: granted each paid period, unused ones end with it; `once`: a pack's.
    period: Literal["period", "once"]


class PublicProduct(Answer):
    id: str
    name: str
    description: str
    price: float
    priceId: str
    type: str
    billingType: str
    billingInterval: str | None
    isFeatured: bool
    perSeat: bool
    trialDays: int | None
    features: list[str]
    # Each feature (of `features` and `credits`) as a buyer reads it: Stripe's Entitlements
    # feature `name`, else the key.
    featureNames: dict[str, str]
    credits: list[CreditGrant]  # what a purchase grants in credits
    # The price's currency, lower-case ISO 4217 as Stripe gives it (null until the catalogue
    # sync has read it), and whether its amount includes tax: a pricing page says "incl. VAT"
    # for inclusive, "+ tax" for exclusive.
    currency: str | None
    taxBehavior: Literal["inclusive", "exclusive", "unspecified"]


class ProductsAnswer(Answer):
    products: list[PublicProduct]


class RepositoriesAnswer(Answer):
    success: bool
    repositories: list[str]


class SampleResult(Answer):
    type: str
    status: str


class SampleEmailsAnswer(Answer):
    success: bool
    message: str
    emailType: str
    results: list[SampleResult]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    answers: dict[int, type[BaseModel] | None]
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    signed_in: bool = False
    only_when: str | None = None  # a blueprint that must be registered for the route to exist
    headers: tuple[str, ...] = field(default=())
    usage_key: bool = False  # authorised by USAGE_API_KEY as a bearer token


# Statuses every route may answer: refused input, a body too large, a dependency down.
COMMON = {400: ErrorAnswer, 413: ErrorAnswer, 415: ErrorAnswer, 503: ErrorAnswer}
# Routes under a per-client limit (runtime/limits.py) answer 429 past it.
LIMITED = {429: ErrorAnswer}
# A team's routes: a stranger is told it does not exist, a member without the role is refused.
TEAM = {401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON}
# The support API (support/routes.py): anyone but an admin (with a second factor unless
# ADMIN_MFA=off) gets 404, as for a route that does not exist.
ADMIN = {404: ErrorAnswer, **COMMON}
OPERATIONS = (
    Operation("get", "/api/auth/callback", "Complete sign-in: code -> session cookies -> 302",
              {302: None, **LIMITED}, query=None),
    Operation("post", "/api/lead", "Store a lead",
              {200: SuccessAnswer, **COMMON, **LIMITED}, LeadRequest),
    Operation("get", "/api/leads/remove",
              "A lead's removal link (signed): an HTML page asking to confirm; removes nothing",
              {200: None, 400: ErrorAnswer, 503: ErrorAnswer, **LIMITED}, query=RemovalQuery),
    Operation("post", "/api/leads/remove",
              "Remove the lead the signed link names (the page's form, or RFC 8058 one-click);"
              " an HTML page",
              {200: None, **COMMON, **LIMITED}, query=RemovalQuery),
    Operation("post", "/api/payments/create-checkout", "A Stripe Checkout URL (for a team too)",
              {200: UrlAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON,
               **LIMITED}, CheckoutRequest,
              signed_in=True),
    Operation("post", "/api/payments/create-portal", "A Stripe customer portal URL (a team's too)",
              {200: UrlAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON,
               **LIMITED}, PortalRequest,
              signed_in=True),
    Operation("post", "/api/payments/preview-change",
              "What changing the plan or seats would charge now and next; changes nothing",
              {200: PreviewAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer,
               409: ErrorAnswer, **COMMON, **LIMITED}, PreviewRequest, signed_in=True),
    Operation("post", "/api/payments/change-plan",
              "Apply a previewed change: an upgrade now, invoiced now; a downgrade at the"
              " period's end. A preview that no longer holds: 409 with a fresh one",
              {200: PreviewAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer,
               409: StalePreviewAnswer, **COMMON, **LIMITED}, ChangeRequest, signed_in=True),
    Operation("post", "/api/payments/cancel",
              "Cancel at the period's end with a reason; with a retention coupon never applied"
              " to this customer, its offer first (changes nothing), then accept or decline",
              {200: CancelAnswer, 401: ErrorAnswer, 403: ErrorAnswer,
               404: ErrorAnswer, 409: ErrorAnswer, **COMMON, **LIMITED}, CancelRequest,
              signed_in=True),
    Operation("post", "/api/payments/resume",
              "Undo a scheduled cancellation or a change still to come",
              {200: ResumeAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer,
               409: ErrorAnswer, **COMMON, **LIMITED}, ResumeRequest, signed_in=True),
    Operation("post", "/api/payments/complete-checkout",
              "The success page's paid checkout applied at once: GET /api/me's answer to its"
              " signed-in buyer, only the session's grant to a guest token",
              {200: CompletionAnswer, 401: ErrorAnswer, 404: ErrorAnswer, 409: ErrorAnswer,
               **COMMON, **LIMITED}, CompletionRequest, signed_in=True),
    Operation("post", "/api/webhook/payments", "Stripe's signed events",
              {200: EmptyAnswer, **COMMON}, headers=("Stripe-Signature",)),
    Operation("post", "/api/github/access", "Invite the buyer's GitHub account",
              {200: RepositoriesAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer,
               409: ErrorAnswer, **COMMON, **LIMITED}, AccessRequest, signed_in=True),
    Operation("get", "/api/me", "The signed-in user's access and entitlements",
              {200: MeAnswer, 401: ErrorAnswer, 503: ErrorAnswer, **LIMITED}, signed_in=True),
    Operation("get", "/api/me/export", "Everything stored about the signed-in user, as JSON",
              {200: ExportAnswer, 401: ErrorAnswer, 503: ErrorAnswer, **LIMITED}, signed_in=True),
    Operation("delete", "/api/me",
              "Delete the signed-in user's account (confirm: their e-mail address); the same"
              " call again finishes one a failure stopped",
              {200: DeletionAnswer, 202: DeletionAnswer, 401: ErrorAnswer, 404: ErrorAnswer,
               409: ErrorAnswer, 500: ErrorAnswer, **COMMON, **LIMITED}, DeleteAccountRequest,
              signed_in=True),
    Operation("post", "/api/usage",
              "Consume credits for a user or a team, once per key (the first answer again);"
              " 404 while USAGE_API_KEY is unset",
              {200: UsageAnswer, 401: ErrorAnswer, 402: NotEnoughAnswer, 404: ErrorAnswer,
               409: ErrorAnswer, **COMMON}, UsageRequest, usage_key=True),
    Operation("post", "/api/usage/check",
              "Whether a consumption would be taken now for a user or a team, and whether any"
              " of it would be overage; takes nothing; 404 while USAGE_API_KEY is unset",
              {200: CheckAnswer, 401: ErrorAnswer, 404: ErrorAnswer, **COMMON}, CheckRequest,
              usage_key=True),
    Operation("post", "/api/teams", "Create a team; the caller is its owner",
              {201: TeamAnswer, 401: ErrorAnswer, **COMMON, **LIMITED}, CreateTeamRequest,
              signed_in=True),
    Operation("get", "/api/teams/{teamId}", "A team: members, invitations, seats, grants",
              {200: TeamDetailAnswer, **TEAM}, signed_in=True),
    Operation("post", "/api/teams/{teamId}/invitations", "Invite by e-mail (owners, admins)",
              {201: InvitationAnswer, 409: ErrorAnswer, **TEAM, **LIMITED}, InvitationRequest,
              signed_in=True),
    Operation("delete", "/api/teams/{teamId}/invitations/{invitationId}", "Revoke an invitation",
              {204: None, **TEAM}, signed_in=True),
    Operation("post", "/api/teams/{teamId}/invitations/{invitationId}/resend",
              "Send an invitation again with a new link (the old one stops working)",
              {200: InvitationAnswer, **TEAM, **LIMITED}, signed_in=True),
    Operation("post", "/api/invitations/lookup",
              "What an invitation's token names: the team, the role, who sent it",
              {200: InvitedAnswer, **COMMON, **LIMITED}, AcceptRequest),
    Operation("post", "/api/invitations/accept", "Join the team an invitation's token names",
              {200: AcceptAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 409: ErrorAnswer,
               **COMMON, **LIMITED},
              AcceptRequest, signed_in=True),
    Operation("patch", "/api/teams/{teamId}/members/{userId}", "Change a member's role (owners)",
              {200: RoleAnswer, 409: ErrorAnswer, **TEAM}, RoleRequest, signed_in=True),
    Operation("delete", "/api/teams/{teamId}/members/{userId}",
              "Remove a member, or leave (the team's access ends at once)",
              {204: None, 409: ErrorAnswer, **TEAM}, signed_in=True),
    Operation("patch", "/api/teams/{teamId}/seats",
              "Set the seats of a per-seat subscription (Stripe prorates)",
              {200: SeatsAnswer, 409: ErrorAnswer, **TEAM, **LIMITED}, SeatsRequest,
              signed_in=True),
    Operation("get", "/api/products/public", "Active products, featured first",
              {200: ProductsAnswer, 503: ErrorAnswer}),
    Operation("get", "/api/test-email", "Send sample e-mails (not in production by default)",
              {200: SampleEmailsAnswer, 400: ErrorAnswer, 401: ErrorAnswer, 403: ErrorAnswer,
               **LIMITED},
              query=SampleEmailQuery, only_when="sample_emails"),
    Operation("get", "/api/admin/customers",
              "Admins: find people by e-mail, name, Stripe customer id or user id (paged)",
              {200: CustomersAnswer, **ADMIN}, query=CustomersQuery, signed_in=True),
    Operation("get", "/api/admin/customers/{userId}",
              "Admins: a person, their accounts, grants and causes, purchases, events, e-mails,"
              " dead letters",
              {200: CustomerAnswer, **ADMIN}, signed_in=True),
    Operation("post", "/api/admin/customers/{userId}/grants",
              "Admins: a complimentary grant (kind comp) until a date or for good, with a reason",
              {201: GrantAnswer, **ADMIN}, CompRequest, signed_in=True),
    Operation("delete", "/api/admin/grants/{grantId}",
              "Admins: end a comp (a Stripe grant: 409, it ends in Stripe), with a reason",
              {200: GrantAnswer, 409: ErrorAnswer, **ADMIN}, ReasonRequest, signed_in=True),
    Operation("post", "/api/admin/events/{eventId}/replay",
              "Admins: fetch an event from Stripe and apply it (the ledger keeps it once)",
              {200: ReplayAnswer, 409: ErrorAnswer, **ADMIN}, ReasonRequest, signed_in=True),
    Operation("post", "/api/admin/emails/{sentEmailId}/resend",
              "Admins: send a sent e-mail again, once (`<eventId>:<kind>`), with a reason",
              {200: ResendAnswer, 202: ResendAnswer, 409: ErrorAnswer, **ADMIN}, ReasonRequest,
              signed_in=True),
    Operation("get", "/api/admin/metrics",
              "Admins: MRR per currency, subscriptions, trials, new, churned, refunds",
              {200: MetricsAnswer, **ADMIN}, signed_in=True),
    Operation("get", "/api/admin/audit", "Admins: the audit log, newest first (paged)",
              {200: AuditAnswer, **ADMIN}, query=PageQuery, signed_in=True),
    Operation("get", "/api/admin/tasks",
              "Admins: what the founder must do by hand (a Stripe customer to redact), not done",
              {200: FounderTasksAnswer, **ADMIN}, signed_in=True),
    Operation("post", "/api/admin/tasks/{taskId}/done",
              "Admins: a founder task done by hand, with a reason",
              {200: FounderTask, **ADMIN}, ReasonRequest, signed_in=True),
    Operation("get", "/healthz", "Liveness", {200: HealthAnswer}),
    Operation("get", "/api/health", "Liveness (a path Cloud Run's front end never reserves)",
              {200: HealthAnswer}),
)  # fmt: skip


def document(*, registered: set[str]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes whose blueprints are registered."""
    operations = [op for op in OPERATIONS if op.only_when is None or op.only_when in registered]
    models = {m for op in operations for m in _models(op)}
    keyed, schemas = models_json_schema(
        [(m, "validation") for m in sorted(models, key=lambda m: m.__name__)],
        ref_template="#/components/schemas/{model}",
    )
    refs = {model: keyed[(model, "validation")] for model in models}
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method] = _operation(op, refs, schemas.get("$defs", {}))
    return {
        "openapi": "3.1.0",
        "info": {"title": "SaaS starter backend", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "usageKey": {"type": "http", "scheme": "bearer"},
            },
        },
    }


def _models(op: Operation) -> list[type[BaseModel]]:
    found = [m for m in op.answers.values() if m is not None]
    return found + [m for m in (op.body, op.query) if m is not None]


def _operation(
    op: Operation, refs: dict[type[BaseModel], Any], defs: dict[str, Any]
) -> dict[str, Any]:
    spec: dict[str, Any] = {"summary": op.summary, "responses": {}}
    for status, model in op.answers.items():
        answer: dict[str, Any] = {"description": str(status)}
        if model is not None:
            answer["content"] = {"application/json": {"schema": refs[model]}}
        spec["responses"][str(status)] = answer
    if op.body is not None:
        spec["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": refs[op.body]}},
        }
    parameters = [_path(name) for name in re.findall(r"{(\w+)}", op.path)]
    parameters += [_header(name) for name in op.headers]
    if op.query is not None:
        parameters += _query_parameters(defs[op.query.__name__])
    if op.path == "/api/auth/callback":
        parameters.append({"name": "code", "in": "query", "schema": {"type": "string"}})
    if parameters:
        spec["parameters"] = parameters
    if op.signed_in:
        spec["security"] = [{"bearer": []}, {}]
    if op.usage_key:
        spec["security"] = [{"usageKey": []}]
    return spec


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _header(name: str) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": True, "schema": {"type": "string"}}


def _query_parameters(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


@bp.get("/api/openapi.json")
def openapi_document() -> ResponseReturnValue:
    return jsonify(document(registered=set(current_app.blueprints)))
