"""What a stranger can send: nested, oversized and malformed cookies, headers, queries and bodies,
through every route that reads them, over HTTP. Each is refused with a 4xx `{"error": ...}` (or
ignored: a garbage cookie is a guest), writes nothing, and is logged below ERROR, so no stranger
can trip the "api answering 5xx" alert or an error report."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, stripe_event, stripe_signature

DEEP = 1500  # past Python's recursion limit, and past orjson's (1024)


def b64url(raw: bytes | str) -> str:
    data = raw.encode() if isinstance(raw, str) else raw
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_with_header(header: str) -> str:
    return f"{b64url(header)}.{b64url('{}')}.{b64url('sig')}"


# Values a cookie, a header or a query can carry, each wrong in its own way.
NESTED_TEXT = {
    "arrays": "[" * DEEP,
    "objects": '{"a":' * DEEP,
    "closed arrays": "[" * 900 + "]" * 900,  # parses in orjson, too deep for naive repr/str
    "a token in deep arrays": '{"access_token":' + "[" * DEEP,
}
MALFORMED_COOKIES = {
    "not base64": "base64-!!!*&^",
    "base64 of bad UTF-8": "base64-" + b64url(b"\xff\xfe\xfd"),
    "base64 of deep arrays": "base64-" + b64url("[" * DEEP),
    "base64 of closed arrays": "base64-" + b64url("[" * 1000 + "]" * 1000),
    "base64 of deep objects": "base64-" + b64url('{"a":' * DEEP),
    "bad JSON": "{not json",
    "a huge number": "1" + "0" * 5000,
    "a JSON string": '"access_token"',
    "a JSON list": '["x"]',
    "null": "null",
    "a token of the wrong type": json.dumps({"access_token": {"a": [1]}}),
    "a token that is no JWT": json.dumps({"access_token": "not.a.jwt"}),
    "a token with a deep header": json.dumps({"access_token": jwt_with_header("[" * DEEP)}),
    "long": "x" * 7000,
}
AUTHORIZATIONS = {
    "deep arrays": "Bearer " + "[" * DEEP,
    "a JWT with a deep header": "Bearer " + jwt_with_header("[" * DEEP),
    "a JWT with a deep object header": "Bearer " + jwt_with_header('{"alg":' * DEEP),
    "a JWT with closed deep arrays": "Bearer " + jwt_with_header("[" * 900 + "]" * 900),
    "a JWT with a nested alg": "Bearer " + jwt_with_header('{"alg":{"a":[1]},"kid":[[]]}'),
    "a JWT with a list kid": "Bearer " + jwt_with_header('{"alg":"ES256","kid":["k"]}'),
    "a JWT with alg none": "Bearer " + jwt_with_header('{"alg":"none"}'),
    "a JWT of bad base64": "Bearer !!!.???.***",
    "a JWT of bad UTF-8": "Bearer " + b64url(b"\xff\xfe") + "." + b64url("{}") + ".x",
    "three dots": "Bearer a.b.c.d",
    "long": "Bearer " + "x" * 7000,
    "no token": "Bearer ",
    "another scheme": "Basic dXNlcjpwYXNz",
}
RAW_HEADER_BYTES = {"bad UTF-8": b"Bearer \xff\xfe\xfd"}
JSON = {"Content-Type": "application/json"}
JSON_ROUTES = (
    "/api/lead",
    "/api/payments/create-checkout",
    "/api/payments/create-portal",
    "/api/github/access",
)
BODIES: dict[str, bytes] = {
    "deep arrays": b"[" * 10_000,
    "deep objects": b'{"a":' * 2_500,
    "closed deep arrays": b"[" * 1000 + b"]" * 1000,
    "a field of deep arrays": b'{"email":' + b"[" * 5_000 + b"]" * 5_000 + b"}",
    "a field of deep objects": b'{"priceId":' + b'{"a":' * 2_000,
    "bad UTF-8": b'{"email": "\xff\xfe"}',
    "bad JSON": b"{not json",
    "a JSON list": b"[1, 2]",
    "null": b"null",
    "a huge number": b'{"email": 1' + b"0" * 5000 + b"}",
    "NaN": b'{"email": NaN}',
    "wrong types": json.dumps(
        {"email": 1, "priceId": [], "username": {}, "returnUrl": None}
    ).encode(),
    "a long string": json.dumps({"email": "a" * 15_000}).encode(),
    "too large": json.dumps({"email": "a" * 20_000}).encode(),
    "far too large": b"[" * 2_000_000,
}


@dataclass
class Sent:
    """What one hostile request got back."""

    label: str
    status: int
    body: bytes
    content_type: str

    def problem(self, *, allowed: tuple[int, ...] = ()) -> str | None:
        if self.status >= 500:
            return f"{self.label}: {self.status} {self.body[:200]!r}"
        if self.status in allowed:
            return None
        if self.status < 400:
            return f"{self.label}: accepted ({self.status})"
        try:
            answer = json.loads(self.body)
        except ValueError:
            return f"{self.label}: {self.status} without a JSON body ({self.body[:100]!r})"
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, str) or not error:
            return f"{self.label}: {self.status} without an error: {answer!r}"
        return None


@dataclass
class Prober:
    api: Api
    db: Database
    buyer: str
    problems: list[str] = field(default_factory=list)

    def send(self, method: str, path: str, label: str, **kwargs: Any) -> Sent:
        try:
            response = requests.request(
                method, self.api.url + path, timeout=HANG_GUARD, allow_redirects=False, **kwargs
            )
        except requests.ConnectionError as exc:
            self.problems.append(f"{method} {path} {label}: connection failed ({exc})")
            return Sent(f"{method} {path} {label}", 0, b"", "")
        return Sent(
            f"{method} {path} {label}",
            response.status_code,
            response.content,
            response.headers.get("Content-Type", ""),
        )

    def expect(self, sent: Sent, *, allowed: tuple[int, ...] = ()) -> None:
        if (problem := sent.problem(allowed=allowed)) is not None:
            self.problems.append(problem)


def row_counts(db: Database) -> dict[str, int]:
    """Every table of the app's schemas, with its number of rows."""
    tables = db.fetch_all(
        "select table_schema, table_name from information_schema.tables"
        " where table_schema in ('public', 'auth') and table_type = 'BASE TABLE'"
    )
    counts: dict[str, int] = {}
    for t in tables:
        name = f'"{t["table_schema"]}"."{t["table_name"]}"'
        [row] = db.fetch_all(f"select count(*) as n from {name}")  # noqa: S608 - catalog names
        counts[name] = int(row["n"])
    return counts


@pytest.fixture
def probe(
    production_api: Callable[..., Api], db: Database, caplog: pytest.LogCaptureFixture
) -> Iterator[Prober]:
    """The production app (test e-mails on, for admins only) over seeded products and a user;
    afterwards: no problem, no row written, nothing logged at ERROR."""
    seed_demo_products(db)
    buyer = create_user(db, "buyer@example.com")
    api = production_api(enable_test_email=True)
    before = row_counts(db)
    prober = Prober(api, db, buyer)
    with caplog.at_level(logging.DEBUG):
        yield prober
    assert not prober.problems, "\n".join(prober.problems)
    assert row_counts(db) == before
    errors = [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, "\n".join(errors)


SIGNED_IN_ROUTES = (
    ("GET", "/api/me"),
    ("POST", "/api/payments/create-portal"),
    ("POST", "/api/payments/create-checkout"),
    ("POST", "/api/github/access"),
    ("GET", "/api/test-email"),
)
# Routes that read no cookie, header or body: whatever comes with a request, they answer.
OPEN_ROUTES = (
    ("GET", "/api/products/public"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/health"),
    ("GET", "/healthz"),
)
# Bodies that pass validation, so what is judged is the cookie or the header alone.
VALID_BODIES = {
    "/api/payments/create-portal": {"returnUrl": "https://shop.acme.dev/account"},
    "/api/payments/create-checkout": {
        "priceId": "price_missing",
        "successUrl": "https://shop.acme.dev/ok",
        "cancelUrl": "https://shop.acme.dev/no",
        "mode": "payment",
    },
    "/api/github/access": {"username": "octocat"},
}


def test_hostile_session_cookies_are_a_guest_everywhere(probe: Prober) -> None:
    key = probe.api.container.supabase_auth.cookie_name
    values = {**NESTED_TEXT, **MALFORMED_COOKIES}
    for name, value in values.items():
        # Whole, chunked as @supabase/ssr splits it, and as the PKCE verifier.
        jars = {
            f"cookie {name}": f"{key}={value}",
            f"chunked cookie {name}": f"{key}.0={value[:3000]}; {key}.1={value[3000:] or 'x'}",
        }
        for label, jar in jars.items():
            for method, path in SIGNED_IN_ROUTES:
                sent = probe.send(
                    method, path, label, headers={"Cookie": jar}, json=VALID_BODIES.get(path)
                )
                # A garbage session is no session: a guest, 401 where a user is needed (a
                # guest may check out: the unknown price is then the 400).
                probe.expect(sent)
                guest = 400 if path == "/api/payments/create-checkout" else 401
                if sent.status != guest:
                    probe.problems.append(f"{sent.label}: {sent.status}, not a guest's {guest}")
            for method, path in OPEN_ROUTES:
                sent = probe.send(method, path, label, headers={"Cookie": jar})
                if sent.status != 200:
                    probe.problems.append(f"{sent.label}: {sent.status}")
            sent = probe.send("GET", "/api/auth/callback", label, headers={"Cookie": jar})
            probe.expect(sent, allowed=(302,))
            verifier = f"{key}-code-verifier={value}"
            sent = probe.send(
                "GET", "/api/auth/callback?code=some-code", f"verifier {name}",
                headers={"Cookie": verifier},
            )  # fmt: skip
            probe.expect(sent, allowed=(302,))
    raw = f"{key}=".encode() + b"\xff\xfe\xfd"
    for method, path in SIGNED_IN_ROUTES:
        probe.expect(probe.send(method, path, "cookie of bad UTF-8", headers={"Cookie": raw}))
    probe.expect(
        probe.send("GET", "/api/auth/callback", "cookie of bad UTF-8", headers={"Cookie": raw}),
        allowed=(302,),
    )


def test_hostile_authorization_headers_are_refused_with_a_401(probe: Prober) -> None:
    headers: dict[str, str | bytes] = {**AUTHORIZATIONS, **RAW_HEADER_BYTES}
    for name, value in headers.items():
        for method, path in SIGNED_IN_ROUTES:
            sent = probe.send(
                method, path, f"Authorization {name}",
                headers={"Authorization": value}, json=VALID_BODIES.get(path),
            )  # fmt: skip
            probe.expect(sent)
            if sent.status != 401:
                probe.problems.append(f"{sent.label}: {sent.status}, not 401")
        for method, path in OPEN_ROUTES:
            sent = probe.send(
                method, path, f"Authorization {name}", headers={"Authorization": value}
            )
            if sent.status != 200:
                probe.problems.append(f"{sent.label}: {sent.status}")


def test_hostile_bodies_are_refused_with_a_4xx(probe: Prober) -> None:
    token = probe.api.token(sub=probe.buyer, email="buyer@example.com")
    # In chunks, with no declared length: what is past the limit is still refused, even when
    # what fits under it would read as a whole JSON object.
    chunked = {
        "chunked too large": b'{"email": "a@b.co"}' + b" " * 20_000,
        "chunked far too large": BODIES["far too large"],
    }
    for path in JSON_ROUTES:
        for auth in ({}, {"Authorization": f"Bearer {token}"}):
            signed_in = " signed in" if auth else ""
            for name, body in BODIES.items():
                for content_type in ("application/json", "text/plain"):
                    sent = probe.send(
                        "POST", path, f"body {name}{signed_in} as {content_type}",
                        data=body, headers={**auth, "Content-Type": content_type},
                    )  # fmt: skip
                    probe.expect(sent)
                    if name in ("too large", "far too large") and sent.status != 413:
                        probe.problems.append(f"{sent.label}: {sent.status}, not 413")
            for name, body in chunked.items():
                sent = probe.send(
                    "POST", path, f"{name}{signed_in}",
                    data=iter([body[:1000], body[1000:]]), headers={**auth, **JSON},
                )  # fmt: skip
                probe.expect(sent)
                if sent.status != 413:
                    probe.problems.append(f"{sent.label}: {sent.status}, not 413")


def test_hostile_queries_are_refused_or_ignored(probe: Prober) -> None:
    buyer = probe.api.token(sub=probe.buyer, email="buyer@example.com")
    queries = {
        "deep": "[" * DEEP,
        "long": "x" * 3000,
        "bad UTF-8": "%FF%FE%FD",
        "NUL": "%00",
    }
    for name, value in queries.items():
        probe.expect(
            probe.send("GET", f"/api/auth/callback?code={value}", f"code {name}"), allowed=(302,)
        )
        for query in (f"type={value}", f"email={value}", f"type=all&email={value}&x={value}"):
            sent = probe.send(
                "GET", f"/api/test-email?{query}", f"query {name}",
                headers={"Authorization": f"Bearer {buyer}"},
            )  # fmt: skip
            probe.expect(sent)


def test_hostile_webhook_signatures_and_bodies_are_refused(probe: Prober) -> None:
    event = stripe_event("checkout.session.completed", {"id": "cs_1", "object": "checkout.session"})
    now = int(time.time())
    good = stripe_signature(event)
    signatures: dict[str, str | bytes] = {
        "missing": "",
        "no timestamp": "v1=" + "0" * 64,
        "a timestamp of letters": "t=abc,v1=" + "0" * 64,
        "a timestamp of 5000 digits": "t=" + "9" * 5000 + ",v1=" + "0" * 64,
        "a wrong signature": f"t={now},v1=" + "0" * 64,
        "deep": "[" * DEEP,
        "long": f"t={now}," + ",".join(["v1=" + "0" * 64] * 100),
        "bad UTF-8": f"t={now},v1=".encode() + b"\xff\xfe",
        "two timestamps": f"t={now},{good}",
    }
    bodies = {"the event": event, **{f"body {k}": v for k, v in BODIES.items()}}
    for sig_name, signature in signatures.items():
        for body_name, body in bodies.items():
            sent = probe.send(
                "POST", "/api/webhook/payments", f"signature {sig_name}, {body_name}",
                data=body,
                headers={"Stripe-Signature": signature, "Content-Type": "application/json"},
            )  # fmt: skip
            probe.expect(sent)
    # Signed as Stripe signs, but not an event: refused, nothing published.
    for name, body in BODIES.items():
        if len(body) > 1024 * 1024:
            continue
        sent = probe.send(
            "POST", "/api/webhook/payments", f"signed body {name}",
            data=body,
            headers={"Stripe-Signature": stripe_signature(body), **JSON},
        )  # fmt: skip
        probe.expect(sent)


def test_hostile_values_of_any_other_header_are_refused_or_ignored(probe: Prober) -> None:
    key = probe.api.container.supabase_auth.cookie_name
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    values: dict[str, str | bytes] = {
        "deep": "[" * DEEP,
        "long": "x" * 7000,
        "5000 digits": "9" * 5000,
        "bad UTF-8": b"\xff\xfe\xfd",
    }
    headers: dict[str, dict[str, str | bytes]] = {
        name: dict(values)
        for name in (
            "traceparent", "X-Cloud-Trace-Context", "X-Forwarded-For", "X-Forwarded-Proto",
            "X-Forwarded-Host", "Origin", "Content-Type", "Accept", "Accept-Encoding",
            "If-None-Match", "Range", "Stripe-Signature",
        )
    }  # fmt: skip
    headers["X-Cloud-Trace-Context"]["a span of 5000 digits"] = f"{trace}/{'9' * 5000};o=1"
    headers["X-Cloud-Trace-Context"]["a span past 64 bits"] = f"{trace}/{2**64};o=1"
    headers["traceparent"]["a trace of letters"] = "00-" + "z" * 32 + "-" + "0" * 16 + "-01"
    # Chunked session cookies numbered past anything @supabase/ssr writes.
    headers["Cookie"] = {
        "a chunk numbered with 5000 digits": f"{key}.{'9' * 5000}=x",
        "a thousand chunks": "; ".join(f"{key}.{n}=x" for n in range(1000)),
    }
    routes = [*SIGNED_IN_ROUTES, *OPEN_ROUTES, ("GET", "/api/auth/callback?code=c")]
    routes += [("POST", path) for path in JSON_ROUTES]
    routes += [("POST", "/api/webhook/payments")]
    for header, variants in headers.items():
        for name, value in variants.items():
            for method, path in routes:
                sent = probe.send(
                    method, path, f"{header} {name}",
                    headers={header: value}, json=VALID_BODIES.get(path),
                )  # fmt: skip
                probe.expect(sent, allowed=(200, 302))
