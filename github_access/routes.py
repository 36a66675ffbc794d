"""POST /api/github/access: deliver a purchased repository to the buyer's GitHub account."""

from __future__ import annotations

import re
from typing import Annotated, Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import ConfigDict, Field, WithJsonSchema, field_validator

from api.deps import caller, container
from api.fields import required_text
from api.identity import require_user
from api.operations import COMMON, LIMITED, Answer, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate
from github_access.service import grant_repository_access

bp = Blueprint("github", __name__)


class RepositoriesAnswer(Answer):
    success: bool
    repositories: list[str]


# GitHub's own rule: 1-39 characters, alphanumerics and single inner hyphens.
USERNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")


class AccessRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["username"]})

    username: Annotated[Any, WithJsonSchema({"type": "string", "maxLength": 40})] = None
    # A team's repository, on the member's seat.
    teamId: str | None = Field(default=None, max_length=64)

    @field_validator("username", mode="before")
    @classmethod
    def _username(cls, value: Any) -> str:
        name = required_text(value, "GitHub username is required").removeprefix("@")
        if not USERNAME.fullmatch(name):
            raise ValueError("GitHub username is not valid")
        return name


@bp.post("/api/github/access")
@documented(
    "Invite the buyer's GitHub account",
    {
        200: RepositoriesAnswer,
        401: ErrorAnswer,
        403: ErrorAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        **COMMON,
        **LIMITED,
    },
    AccessRequest,
    signed_in=True,
)
def github_access() -> ResponseReturnValue:
    c = container()
    body = validate(AccessRequest, json_object())
    user = require_user(caller())
    repositories = grant_repository_access(
        user=user, username=body.username, db=c.db, github=c.github, bus=c.bus, team_id=body.teamId
    )
    return jsonify(success=True, repositories=repositories)
