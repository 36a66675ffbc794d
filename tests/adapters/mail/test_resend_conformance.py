"""What crosses the Resend boundary speaks Resend's published OpenAPI document
(tests/fixtures/resend/): the requests the mailer sends through the SDK and the answers the
fake gives. Every fixture serving the fake holds every exchange against the document; here each
of the mailer's calls is driven once, and broken copies of the fake, of a request and of the
document show that the check refuses what the document refuses."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from werkzeug.datastructures import Headers
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request, Response

from adapters.mail.message import send_email
from adapters.mail.resend import ResendMailer
from tests.conftest import serving
from tests.fakes.http import json_response, serve
from tests.fakes.resend import FakeResend
from tests.fakes.resend_openapi import DOCUMENT, nonconformities, resend_openapi
from tests.helpers import HANG_GUARD

SENDER = "Acme Team <hello@acme.example.com>"


@pytest.fixture
def resend() -> Iterator[FakeResend]:
    yield from serving(FakeResend())


def mailer(fake: FakeResend) -> ResendMailer:
    return ResendMailer("re_test", fake.server.url, timeout=5, rate_per_second=1000)


def send(mailer: ResendMailer, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "to": "ada@example.com",
        "subject": "Receipt",
        "text": "Thanks.",
        "html": "<p>Thanks.</p>",
        "from_": SENDER,
    }
    return send_email(mailer, **(fields | overrides))


def documented_operations() -> set[tuple[str, str]]:
    paths: dict[str, dict[str, Any]] = yaml.safe_load(DOCUMENT.read_text())["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


def test_the_document_is_resends_named_with_its_source_and_version() -> None:
    readme = (DOCUMENT.parent / "README.md").read_text()
    version = str((resend_openapi().spec / "info")["version"])

    assert "resend/resend-openapi" in readme
    assert re.search(r"\b[0-9a-f]{40}\b", readme), "the commit it was taken from"
    assert f"`{version}`" in readme
    assert ("POST", "/emails") in documented_operations()
    assert ("GET", "/emails/{email_id}") in documented_operations()


def test_every_route_of_the_fake_is_an_operation_of_the_document() -> None:
    """A route the fake adds is one the document describes, so the check covers it."""
    fake = FakeResend()
    routes = {
        (method, re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule))
        for rule in fake.server._map.iter_rules()
        for method in rule.methods or ()
        if method not in {"HEAD", "OPTIONS"}
    }

    assert routes
    assert routes <= documented_operations()


def test_every_call_the_mailer_makes_and_every_answer_conform(resend: FakeResend) -> None:
    sender = mailer(resend)

    first = send(sender, reply_to="support@acme.example.com", idempotency_key="evt_1/receipt")
    send(sender, to=["ada@example.com", "bob@example.com"])  # no reply-to, no key
    resend.fail_next(1)
    send(sender, idempotency_key="evt_2/receipt")  # a 500, then the same request again
    kept = sender.sent_copy(provider_id=first["id"], idempotency_key="evt_1/receipt")
    missing = sender.sent_copy(provider_id="4ef9a417-0000", idempotency_key="evt_9/receipt")

    assert kept is not None
    assert kept.reply_to == ("support@acme.example.com",)
    assert missing is None
    calls = [(r.method, r.path) for r in resend.server.requests]
    assert calls.count(("POST", "/emails")) == 4
    assert ("GET", f"/emails/{first['id']}") in calls
    assert resend.nonconforming == []


def test_the_fakes_kept_e_mail_lists_its_addresses_as_the_document_types_them(
    resend: FakeResend,
) -> None:
    sent = send(mailer(resend), idempotency_key="evt_3/receipt")

    kept = requests.get(
        f"{resend.server.url}/emails/{sent['id']}",
        headers={"Authorization": "Bearer re_test"},
        timeout=HANG_GUARD,
    ).json()

    assert (kept["cc"], kept["bcc"], kept["reply_to"]) == ([], [], [])
    assert resend.nonconforming == []


class NullAddresses(FakeResend):
    """A broken copy of the fake: its kept e-mail gives cc, bcc and reply_to as null."""

    def _get(self, request: Request, email_id: str) -> Response:
        answer = json.loads(super()._get(request, email_id).get_data())
        return json_response(answer | {"cc": None, "bcc": None, "reply_to": None})


def test_a_fake_answering_null_addresses_is_refused() -> None:
    fake = NullAddresses()
    for url in serve(fake.server):
        fake.server.url = url
        sender = mailer(fake)
        sent = send(sender)
        sender.sent_copy(provider_id=sent["id"], idempotency_key="evt_4/receipt")

    assert sorted(fake.nonconforming) == [
        f"GET /emails/{sent['id']} answer 200: body['{name}']: None is not of type 'array'"
        for name in ("bcc", "cc", "reply_to")
    ]
    with pytest.raises(AssertionError, match="refuses"):
        fake.assert_conforms()


@pytest.mark.parametrize(
    ("headers", "body", "refused"),
    [
        ({}, {"from": SENDER, "to": "a@example.com", "subject": "s"}, "Security not found"),
        (
            {"Authorization": "Bearer re_test", "Idempotency-Key": "k" * 257},
            None,
            "header parameter Idempotency-Key",
        ),
        (None, {"from": SENDER, "to": [], "subject": "s"}, "body['to']"),
        (None, {"from": SENDER, "to": "a@example.com", "subject": "s", "cc": None}, "body['cc']"),
        (None, {"to": "a@example.com", "subject": "s"}, "'from' is a required property"),
    ],
)
def test_a_request_the_document_refuses_is_named(
    headers: dict[str, str] | None, body: dict[str, Any] | None, refused: str
) -> None:
    fake = FakeResend()
    sent = {"from": SENDER, "to": "a@example.com", "subject": "s"} if body is None else body
    for url in serve(fake.server):
        requests.post(
            f"{url}/emails",
            json=sent,
            headers={"Authorization": "Bearer re_test"} if headers is None else headers,
            timeout=HANG_GUARD,
        )

    assert len(fake.nonconforming) == 1
    assert fake.nonconforming[0].startswith("POST /emails request: ")
    assert refused in fake.nonconforming[0]


def test_a_broken_copy_of_the_document_refuses_an_answer_the_published_one_takes(
    tmp_path: Path,
) -> None:
    document = yaml.safe_load(DOCUMENT.read_text())
    document["components"]["schemas"]["Email"]["properties"]["cc"] = {"type": "string"}
    broken = tmp_path / "openapi.yaml"
    broken.write_text(yaml.safe_dump(document))
    request = Request(
        EnvironBuilder(
            path="/emails/e1",
            method="GET",
            headers=Headers({"Authorization": "Bearer re_test"}),
        ).get_environ()
    )
    answer = json_response({"object": "email", "id": "e1", "cc": ["a@example.com"]})

    assert nonconformities(request, answer) == []
    assert nonconformities(request, answer, document=broken) == [
        "GET /emails/e1 answer 200: body['cc']: ['a@example.com'] is not of type 'string'"
    ]


def test_an_answer_whose_status_the_document_does_not_describe_is_not_judged() -> None:
    """Resend's errors are not in its document: their shape is held by the adapter's tests."""
    request = Request(
        EnvironBuilder(
            path="/emails/e1",
            method="GET",
            headers=Headers({"Authorization": "Bearer re_test"}),
        ).get_environ()
    )
    error = json_response({"statusCode": 404, "name": "not_found", "message": "no"}, 404)

    assert nonconformities(request, error) == []
