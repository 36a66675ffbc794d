"""GET /healthz: the process answers (no dependency is dialled, so probes stay cheap)."""

from __future__ import annotations

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from api.operations import Answer, documented

bp = Blueprint("health", __name__)


class HealthAnswer(Answer):
    status: str


@bp.get("/healthz")
@bp.get("/api/health")  # Cloud Run's front end may reserve paths ending in "z"
@documented(
    "Liveness (a path Cloud Run's front end never reserves)",
    {200: HealthAnswer},
    path="/api/health",
)
@documented(
    "Liveness",
    {200: HealthAnswer},
    path="/healthz",
)
def healthz() -> ResponseReturnValue:
    return jsonify(status="ok")
