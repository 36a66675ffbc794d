"""GET /api/test-email: registered only when ENABLE_TEST_EMAIL is on (never by default in
production); in production, only an admin may call it, and only for their own inbox or the
support inbox, so strangers cannot use the service to send mail."""

from __future__ import annotations

from typing import Annotated, Any, Protocol, cast

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import WithJsonSchema, field_validator

from api.deps import Collaborators, caller, container
from api.operations import LIMITED, Answer, ErrorAnswer, documented
from api.parsing import EMAIL_SCHEMA, RequestModel, validate
from core.addresses import email_address
from emails.kind import Senders
from emails.kinds import KINDS
from emails.samples import catalogue_product, recipient, send_samples


class _Collaborators(Collaborators, Protocol):
    """What these routes use of the container beyond every domain's `Collaborators`."""

    @property
    def senders(self) -> Senders: ...


def _container() -> _Collaborators:
    return cast("_Collaborators", container())


bp = Blueprint("sample_emails", __name__)


class SampleResult(Answer):
    type: str
    status: str


class SampleEmailsAnswer(Answer):
    success: bool
    message: str
    emailType: str
    results: list[SampleResult]


class SampleEmailQuery(RequestModel):
    type: Annotated[str, WithJsonSchema({"type": "string", "enum": [*KINDS, "all"]})] = "all"
    email: Annotated[str | None, WithJsonSchema(EMAIL_SCHEMA)] = None

    @field_validator("type")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in (*KINDS, "all"):
            raise ValueError(f"Unknown email type '{value}'; use one of: {', '.join(KINDS)}, all")
        return value

    @field_validator("email", mode="before")
    @classmethod
    def _email(cls, value: Any) -> str | None:
        return email_address(value) if value else None


@bp.get("/api/test-email")
@documented(
    "Send sample e-mails (not in production by default)",
    {200: SampleEmailsAnswer, 400: ErrorAnswer, 401: ErrorAnswer, 403: ErrorAnswer, **LIMITED},
    query=SampleEmailQuery,
)
def send_sample_emails() -> ResponseReturnValue:
    c = _container()
    query = validate(SampleEmailQuery, request.args.to_dict())
    production = c.settings.is_production
    to = recipient(
        requested=query.email,
        support_email=c.settings.support_email,
        admin_only=production,
        user=caller() if production else None,
        db=c.db,
    )
    kinds = KINDS if query.type == "all" else (query.type,)
    results = send_samples(
        kinds=kinds,
        to=to,
        mailer=c.mailer,
        brand=c.brand,
        senders=c.senders,
        reply_to=c.settings.support_email,
        product=catalogue_product(c.db),
    )
    sent = all(r.status == "sent" for r in results)
    noun = "email" if len(kinds) == 1 else "emails"
    response = jsonify(
        success=sent,
        message=f"Test {noun} sent to {to}" if sent else f"Some test {noun} to {to} failed",
        emailType=query.type,
        results=[{"type": r.type, "status": r.status} for r in results],
    )
    # A GET that sends mail: a cache answering it again would send nothing.
    response.headers["Cache-Control"] = "no-store"
    return response
