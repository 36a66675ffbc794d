"""The OpenAPI document covers every route, and the app keeps it: fuzzed over HTTP on real
Postgres with Schemathesis, no input yields a 5xx, every 4xx is `{"error": ...}`, and every
answer matches its documented schema."""

from __future__ import annotations

import re
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from config import Settings
from main import create_app
from runtime.openapi import document, undocumented
from tests.conftest import Api
from tests.helpers import HANG_GUARD

# The document of an app with every route on (the sample-mail route included); built
# in-process, which dials nothing. The fuzzing itself goes over HTTP to a real server.
EVERY_ROUTE = create_app(Settings(enable_test_email=True, app_env="development"))
DOCUMENT = document(EVERY_ROUTE)
schema = schemathesis.openapi.from_dict(DOCUMENT)


def test_every_route_of_the_app_is_documented(api: Api) -> None:
    served = requests.get(api.url + "/api/openapi.json", timeout=HANG_GUARD).json()
    routes = {
        # Flask names a path's parameters <name>, OpenAPI {name}.
        (re.sub(r"<(\w+)>", r"{\1}", rule.rule), method.lower())
        for rule in create_app(container=api.container).url_map.iter_rules()
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS") and rule.endpoint != "static"
    }
    documented = {(path, method) for path, ops in served["paths"].items() for method in ops}
    assert routes - {("/api/openapi.json", "get")} == documented
    assert served == DOCUMENT


def test_every_registered_route_declares_its_operation() -> None:
    assert undocumented(EVERY_ROUTE) == []
    assert "/api/test-email" in DOCUMENT["paths"]


def test_a_route_that_is_not_registered_is_not_told() -> None:
    off = create_app(Settings(enable_test_email=False, app_env="development"))
    assert "/api/test-email" not in document(off)["paths"]
    assert set(document(off)["paths"]) == set(DOCUMENT["paths"]) - {"/api/test-email"}


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_input_yields_a_server_error(case: Any, api: Api) -> None:
    response = case.call(base_url=api.url, allow_redirects=False, timeout=HANG_GUARD)
    assert response.status_code < 500, (case.method, case.path, response.text[:300])
    if 400 <= response.status_code < 500:
        body = response.json()
        assert set(body) == {"error"}, body
        assert body["error"], body
    case.validate_response(response, checks=[status_code_conformance, response_schema_conformance])
