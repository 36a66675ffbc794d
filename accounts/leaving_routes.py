"""Leaving: GET /api/me/export and DELETE /api/me (the signed-in person's own)."""

from __future__ import annotations

from typing import Annotated, Any, Protocol, cast

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, WithJsonSchema

from accounts import leaving
from accounts.leaving import Deletions
from api.deps import Collaborators, caller, container
from api.identity import require_user
from api.operations import COMMON, LIMITED, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate


class _Collaborators(Collaborators, Protocol):
    """What these routes use of the container beyond every domain's `Collaborators`."""

    @property
    def account_deletions(self) -> Deletions: ...


def _container() -> _Collaborators:
    return cast("_Collaborators", container())


bp = Blueprint("leaving", __name__)


class DeleteAccountRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["confirm"]})

    # The account's own e-mail address, typed again (checked by the service against the
    # account's: accounts/leaving_rules.py `confirmation_problem`).
    confirm: Annotated[Any, WithJsonSchema({"type": "string", "format": "email"})] = None


class ExportAnswer(BaseModel):
    """Every row stored about the person, by table; the rows' fields as stored."""

    model_config = ConfigDict(extra="forbid")

    exportedAt: str
    profile: dict[str, Any] | None
    accounts: list[dict[str, Any]]  # their own account, with its Stripe customers
    grants: list[dict[str, Any]]  # their own account's entitlements
    purchases: list[dict[str, Any]]  # what they paid for, on their account or a team's
    githubGrants: list[dict[str, Any]]
    teams: list[dict[str, Any]]  # each team's id and name, with their own role and seat
    teamGithubGrants: list[dict[str, Any]]
    emailsSent: list[dict[str, Any]]  # kind and date of each mail sent to their address
    leads: list[dict[str, Any]]  # the landing page's leads with their address


class DeletionAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    deleted: bool
    # false: the access target runs the steps (the Pub/Sub design), or Stripe still validates
    # a redaction; a later call finishes it
    finished: bool
    remaining: list[str]  # the steps still to run


@bp.get("/api/me/export")
@documented(
    "Everything stored about the signed-in user, as JSON",
    {200: ExportAnswer, 401: ErrorAnswer, 503: ErrorAnswer, **LIMITED},
    signed_in=True,
)
def export() -> ResponseReturnValue:
    user = require_user(caller())
    response = jsonify(leaving.export(user, db=container().db))
    response.headers["Cache-Control"] = "private, no-store"
    response.headers["Content-Disposition"] = 'attachment; filename="my-data.json"'
    return response


@bp.delete("/api/me")
@documented(
    "Delete the signed-in user's account (confirm: their e-mail address); the same"
    " call again finishes one a failure stopped",
    {
        200: DeletionAnswer,
        202: DeletionAnswer,
        401: ErrorAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        500: ErrorAnswer,
        **COMMON,
        **LIMITED,
    },
    DeleteAccountRequest,
    signed_in=True,
)
def delete_account() -> ResponseReturnValue:
    # Asked again, it finishes a deletion under way: the one call such a token may still make.
    user = require_user(caller(resuming_deletion=True))
    body = validate(DeleteAccountRequest, json_object())
    outcome = leaving.delete_account(user, body.confirm, deletions=_container().account_deletions)
    # Not finished: the access target runs the steps (the Pub/Sub design), or Stripe still
    # validates a redaction; a later call (or `flask account-deletions resume`) finishes it.
    answer = DeletionAnswer(deleted=True, finished=outcome.finished, remaining=outcome.remaining)
    return jsonify(answer.model_dump()), 200 if outcome.finished else 202
