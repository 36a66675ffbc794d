"""GET /api/openapi.json: the OpenAPI 3.1 document of the app's routes, from what each route
declares where it is defined (`api.operations.documented`: the pydantic models it validates with
and answers with). Only registered routes are walked, so a route off (the sample-mail route in
production) is not told."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Flask, current_app, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.operations import Operation, operation_of

bp = Blueprint("openapi", __name__)

# Routes the document does not describe: itself.
UNDOCUMENTED = frozenset({"openapi.openapi_document"})


def operations(app: Flask) -> list[tuple[str, str, Operation]]:
    """(method, path as OpenAPI writes it, operation) of every registered route; a route that
    declares none is a mistake the tests catch (`undocumented`)."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.endpoint in UNDOCUMENTED:
            continue
        operation = operation_of(app.view_functions[rule.endpoint], rule.rule)
        if operation is None:
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        for method in sorted(rule.methods or ()):
            if method not in ("HEAD", "OPTIONS"):
                found.append((method.lower(), path, operation))
    return found


def undocumented(app: Flask) -> list[str]:
    """The registered routes that declare no operation."""
    return sorted(
        rule.rule
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static"
        and rule.endpoint not in UNDOCUMENTED
        and operation_of(app.view_functions[rule.endpoint], rule.rule) is None
    )


def document(app: Flask) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the app's registered routes."""
    found = operations(app)
    models = {m for _, _, op in found for m in _models(op)}
    keyed, schemas = models_json_schema(
        [(m, "validation") for m in sorted(models, key=lambda m: m.__name__)],
        ref_template="#/components/schemas/{model}",
    )
    refs = {model: keyed[(model, "validation")] for model in models}
    paths: dict[str, dict[str, Any]] = {}
    for method, path, op in found:
        spec = _operation(path, op, refs, schemas.get("$defs", {}))
        paths.setdefault(path, {})[method] = spec
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
    path: str, op: Operation, refs: dict[type[BaseModel], Any], defs: dict[str, Any]
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
    parameters = [_path(name) for name in re.findall(r"{(\w+)}", path)]
    parameters += [_header(name) for name in op.headers]
    if op.query is not None:
        parameters += _query_parameters(defs[op.query.__name__])
    if path == "/api/auth/callback":
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
    return jsonify(document(current_app))
