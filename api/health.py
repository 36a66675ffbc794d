"""GET /healthz: the process answers (no dependency is dialled, so probes stay cheap)."""

from __future__ import annotations

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@bp.get("/api/health")  # Cloud Run's front end may reserve paths ending in "z"
def healthz() -> ResponseReturnValue:
    return jsonify(status="ok")
