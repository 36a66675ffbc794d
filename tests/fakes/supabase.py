"""Supabase Auth (GoTrue) behind today's API gateway, as documented.

The gateway wants the project's API key in `apikey` and refuses an `Authorization` bearer that
is neither that key again (as supabase-js sends it) nor a JWT. The project signs tokens with an
ES256 key it publishes in its JWKS beside a standby key; `rotate()` makes the standby current
(the one before stays published until `revoke_previous()`), while the service runs.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import jwt
import psycopg
from cryptography.hazmat.primitives.asymmetric import ec
from werkzeug.wrappers import Request, Response

from tests.fakes.http import FakeServer, json_response

JWT_SECRET = "super-secret-jwt-token-with-at-least-32-characters-long"
# A project's keys as the dashboard shows them today.
SECRET_KEY = "sb_secret_test_9b2f4c1e0d7a6b5c4d3e2f1a"
PUBLISHABLE_KEY = "sb_publishable_test_1a2b3c4d5e6f7a8b9c0d"


@dataclass
class FakeSupabaseAuth:
    server: FakeServer = field(default_factory=FakeServer)
    # auth code -> (code verifier, user)
    codes: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    signing_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    kid: str = "test-key-1"
    # The standby key, published before it signs anything, and the one a rotation retired.
    standby: tuple[str, ec.EllipticCurvePrivateKey] = field(
        default_factory=lambda: ("test-key-2", ec.generate_private_key(ec.SECP256R1()))
    )
    previous: tuple[str, ec.EllipticCurvePrivateKey] | None = None
    # The secret API keys the admin routes take (legacy service_role, today's sb_secret_).
    secret_keys: frozenset[str] = frozenset({"service-role-key", SECRET_KEY})
    links: list[str] = field(default_factory=list)
    # The next this many sign-in links find Auth unavailable (503 from the gateway, as in an
    # outage or a restart).
    unavailable: int = 0
    # Supabase Auth writes its users into the project's own Postgres; so does this fake.
    database_url: str | None = None

    def __post_init__(self) -> None:
        self.server.route("/auth/v1/token", ("POST",), self._token)
        self.server.route("/auth/v1/admin/users", ("POST",), self._create_user)
        self.server.route("/auth/v1/admin/generate_link", ("POST",), self._generate_link)
        self.server.route("/auth/v1/admin/users/<user_id>", ("DELETE",), self._delete_user)
        self.server.route("/auth/v1/.well-known/jwks.json", ("GET",), self._jwks)

    def reset(self) -> None:
        self.server.reset()
        self.codes.clear()
        self.links.clear()
        self.unavailable = 0

    def rotate(self) -> None:
        """The standby key signs from now on; a new standby is published; the retired key
        stays in the JWKS (tokens it signed are still live) until `revoke_previous`."""
        self.previous = (self.kid, self.signing_key)
        self.kid, self.signing_key = self.standby
        number = int(self.kid.rsplit("-", 1)[-1]) + 1
        self.standby = (f"test-key-{number}", ec.generate_private_key(ec.SECP256R1()))

    def revoke_previous(self) -> None:
        self.previous = None

    def issue_code(
        self,
        *,
        verifier: str,
        user_id: str,
        email: str,
        created_at: str = "2026-01-01T10:00:00Z",
        name: str | None = None,
    ) -> str:
        """A PKCE code for a user created at `created_at` (an ISO timestamp)."""
        code = str(uuid.uuid4())
        user = {"id": user_id, "email": email, "created_at": created_at, "name": name}
        self.codes[code] = (verifier, user)
        return code

    @property
    def issuer(self) -> str:
        """The `iss` Supabase Auth writes: the project URL + /auth/v1."""
        return f"{self.server.url}/auth/v1"

    def es256_token(self, *, sub: str, email: str, exp_in: int = 3600) -> str:
        claims = _claims(sub, email, exp_in, self.issuer)
        return jwt.encode(claims, self.signing_key, algorithm="ES256", headers={"kid": self.kid})

    def _token(self, request: Request) -> Response:
        if (refused := gateway_refusal(request)) is not None:
            return refused
        body = request.get_json()
        found = self.codes.pop(body.get("auth_code"), None)
        if (
            request.args.get("grant_type") != "pkce"
            or found is None
            or found[0] != body.get("code_verifier")
        ):
            return json_response(
                {
                    "code": 400,
                    "error_code": "bad_code_verifier",
                    "msg": "code challenge does not match previously saved code verifier",
                },
                400,
            )
        user = found[1]
        return json_response(
            {
                "access_token": hs256_token(
                    sub=user["id"], email=user["email"], issuer=self.issuer
                ),
                "token_type": "bearer",
                "expires_in": 3600,
                "expires_at": int(time.time()) + 3600,
                "refresh_token": "refresh-" + uuid.uuid4().hex,
                "user": {
                    "id": user["id"],
                    "aud": "authenticated",
                    "role": "authenticated",
                    "email": user["email"],
                    "app_metadata": {"provider": "email"},
                    "user_metadata": {"full_name": user["name"]} if user["name"] else {},
                    "created_at": user["created_at"],
                },
            }
        )

    def _create_user(self, request: Request) -> Response:
        if (denied := self._service_role_only(request)) is not None:
            return denied
        body = request.get_json()
        user_id = str(uuid.uuid4())
        assert self.database_url is not None
        with psycopg.connect(self.database_url) as conn:
            created = conn.execute(
                "insert into auth.users (id, email, raw_user_meta_data) values (%s, %s, %s)"
                " on conflict ((lower(email))) do nothing returning id",
                (user_id, body["email"], json.dumps(body.get("user_metadata") or {})),
            ).fetchone()
        if created is None:
            return json_response(
                {
                    "code": 422,
                    "error_code": "email_exists",
                    "msg": "A user with this email address has already been registered",
                },
                422,
            )
        return json_response(_user(user_id, body["email"], body.get("user_metadata") or {}))

    def _delete_user(self, request: Request, user_id: str) -> Response:
        """As GoTrue's admin delete: the user goes from auth.users (the project's cascades
        follow); `unavailable` answers 503 from the gateway, as for a sign-in link."""
        if (denied := self._service_role_only(request)) is not None:
            return denied
        if self.unavailable > 0:
            self.unavailable -= 1
            return json_response(
                {"message": "An invalid response was received from the upstream server"}, 503
            )
        assert self.database_url is not None
        with psycopg.connect(self.database_url) as conn:
            gone = conn.execute(
                "delete from auth.users where id = %s returning id", (user_id,)
            ).fetchone()
        if gone is None:
            return json_response(
                {"code": 404, "error_code": "user_not_found", "msg": "User not found"}, 404
            )
        return json_response({})

    def _generate_link(self, request: Request) -> Response:
        """As GoTrue: a magic link for an existing user, with the hashed token and redirect."""
        if (denied := self._service_role_only(request)) is not None:
            return denied
        if self.unavailable > 0:
            self.unavailable -= 1
            return json_response(
                {"message": "An invalid response was received from the upstream server"}, 503
            )
        body = request.get_json()
        assert self.database_url is not None
        with psycopg.connect(self.database_url) as conn:
            row = conn.execute(
                "select id::text from auth.users where lower(email) = lower(%s)", (body["email"],)
            ).fetchone()
        if row is None:
            return json_response(
                {"code": 404, "error_code": "user_not_found", "msg": "User not found"}, 404
            )
        token = uuid.uuid4().hex
        redirect = request.args.get("redirect_to") or self.server.url
        link = (
            f"{self.server.url}/auth/v1/verify?token={token}&type={body['type']}"
            f"&redirect_to={redirect}"
        )
        self.links.append(link)
        return json_response(
            {
                **_user(row[0], body["email"], {}),
                "action_link": link,
                "email_otp": "123456",
                "hashed_token": token,
                "redirect_to": redirect,
                "verification_type": body["type"],
            }
        )

    def _jwks(self, request: Request) -> Response:
        published = [(self.kid, self.signing_key), self.standby]
        if self.previous is not None:
            published.append(self.previous)
        keys = [
            {
                **jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True),
                "kid": kid,
                "alg": "ES256",
                "use": "sig",
                "key_ops": ["verify"],
            }
            for kid, key in published
        ]
        return json_response({"keys": keys})

    def _service_role_only(self, request: Request) -> Response | None:
        if (refused := gateway_refusal(request)) is not None:
            return refused
        if request.headers.get("apikey") in self.secret_keys:
            return None
        return json_response({"code": 401, "error_code": "no_authorization", "msg": "no"}, 401)


def gateway_refusal(request: Request) -> Response | None:
    """What the API gateway answers before Auth sees the request, if it refuses it."""
    key = request.headers.get("apikey")
    if not key:
        return json_response({"message": "No API key found in request"}, 401)
    _, _, bearer = request.headers.get("Authorization", "").partition(" ")
    if bearer and not (bearer == key or bearer.count(".") == 2):
        return json_response({"message": "Invalid authorization header"}, 401)
    return None


def _user(user_id: str, email: str, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": user_id,
        "aud": "authenticated",
        "role": "authenticated",
        "email": email,
        "email_confirmed_at": "2026-11-21T10:00:00Z",
        "app_metadata": {"provider": "email"},
        "user_metadata": metadata,
        "created_at": "2026-11-21T10:00:00Z",
    }


def _claims(sub: str, email: str, exp_in: int, issuer: str) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": issuer,
        "sub": sub,
        "email": email,
        "aud": "authenticated",
        "role": "authenticated",
        "iat": now,
        "exp": now + exp_in,
    }


def hs256_token(
    *, sub: str, email: str, issuer: str, exp_in: int = 3600, secret: str = JWT_SECRET
) -> str:
    """An access token as Supabase signs it with the legacy JWT secret."""
    return jwt.encode(_claims(sub, email, exp_in, issuer), secret, algorithm="HS256")
