"""The one local Supabase Auth (GoTrue): the slice of its API this service and a browser's
supabase-js call, for `make run` and the tests, without a Supabase project.

Users are the rows of the database's `auth.users` (the local stand-in of Supabase's schema, or a
real one), so `flask --app main users create` and sign-up here make the same accounts. It speaks
GoTrue's documented routes under `/auth/v1` as supabase-js (auth-js) and supabase-py call them:

- `POST /signup` (e-mail and password; confirmed at once, as the Supabase CLI's local stack
  confirms: `enable_confirmations = false`), `POST /token?grant_type=password|refresh_token|pkce`
  (refresh tokens are single use: each refresh hands a new one, and a spent one presented again
  ends its session, as GoTrue's reuse detection does), `GET /user`, `POST /logout?scope=`;
- `POST /otp`: a magic link, mailed to the local outbox (`.eml`), to `GET /verify`, which
  redirects to `redirect_to` with `?code=` when the link was asked with a PKCE `code_challenge`
  (the code is exchanged at `POST /token?grant_type=pkce`, as the API's `/api/auth/callback`
  does), else with the session in the fragment (implicit flow). A `redirect_to` that is not the
  site (scheme, host and port of SITE_URL; any port on loopback) or on the allow list is
  replaced by the site, as GoTrue does;
- the admin routes the subscribers call with a secret key: `POST /admin/users`,
  `POST /admin/generate_link`, `DELETE /admin/users/{id}` (an account deletion);
- multi-factor authentication as supabase-js's `auth.mfa` calls it: `POST /factors` (a TOTP
  factor: its secret, its `otpauth://` URI and that URI's QR code as SVG), `POST
  /factors/{id}/challenge`, `POST /factors/{id}/verify` (a real RFC 6238 code: the session goes
  to `aal2`, its tokens carry `aal` and an `amr` naming `totp`, the user's sessions still at
  `aal1` end, as GoTrue ends them) and `DELETE /factors/{id}` (a verified factor only from an
  `aal2` session; its sessions go back to `aal1`); `GET /user` lists the user's `factors`;
- `GET /.well-known/jwks.json`: access tokens are signed ES256 with a key published beside a
  standby key; `rotate()` makes the standby current while the service runs. Given the legacy JWT
  secret, `/user` and `/logout` check HS256 signatures with it too; like every token there, one
  must name a live session of this stand-in (`flask users token`'s name none: `session_not_found`).

Access tokens carry the claims of the project's Custom Access Token Hook
(`public.custom_access_token_hook`, called as `supabase_auth_admin` as Supabase Auth calls it) at
issue and at every refresh: after a purchase, a refresh gives the new `has_access`/`features`.
In front of it, the API gateway's rules: an `apikey` header is required, an `Authorization`
bearer must be that key again or a JWT, and the admin routes take a secret key only. CORS
answers the frontend's origins. With a state file (`make run`: `.data/auth.json`), its signing
keys and sessions survive a restart.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import html
import io
import json
import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jwt
import psycopg
import pyotp
import segno
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from psycopg.rows import dict_row, tuple_row
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from adapters.mail.message import OutgoingEmail
from adapters.mail.outbox import OutboxMailer
from adapters.tokens import access_claims
from config.supabase import SUPABASE_LOCAL_JWT_SECRET
from dev import loopback
from dev.stripe_stand_in import Recorded

# The API keys the Supabase CLI's local stack prints (public values, config/supabase.py).
PUBLISHABLE_KEY = "sb_publishable_ACJWlzQHlZjBrEguHvfOxg_3BJgxAaH"
SECRET_KEY = "sb_secret_N7UND0UgjKTVK-Uodkm0Hg_xSvEMPvz"  # noqa: S105
JWT_SECRET = SUPABASE_LOCAL_JWT_SECRET
API_VERSION = "2024-01-01"  # GoTrue's, in `X-Supabase-Api-Version` on every answer
JWT_EXPIRY = 3600  # GoTrue's default `jwt_expiry`
OTP_EXPIRY = 3600  # Supabase's default "Email OTP Expiration"
FLOW_STATE_EXPIRY = 300  # a PKCE auth code lives five minutes, as GoTrue's flow state
MIN_PASSWORD = 6  # GoTrue's default minimum password length
MFA_CHALLENGE_EXPIRY = 300  # GoTrue's default `MFA_CHALLENGE_EXPIRY_DURATION`
MAX_FACTORS = 10  # GoTrue's default `MFA_MAX_ENROLLED_FACTORS`
LOOPBACK = {"localhost", "127.0.0.1", "::1"}
ALLOWED_HEADERS = "authorization, apikey, content-type, x-client-info, x-supabase-api-version"
log = logging.getLogger(__name__)

_ROUTES = Map(
    [
        Rule("/auth/v1/.well-known/jwks.json", methods=["GET"], endpoint="jwks"),
        Rule("/auth/v1/signup", methods=["POST"], endpoint="signup"),
        Rule("/auth/v1/token", methods=["POST"], endpoint="token"),
        Rule("/auth/v1/otp", methods=["POST"], endpoint="otp"),
        Rule("/auth/v1/verify", methods=["GET"], endpoint="verify"),
        Rule("/auth/v1/user", methods=["GET"], endpoint="user"),
        Rule("/auth/v1/logout", methods=["POST"], endpoint="logout"),
        Rule("/auth/v1/factors", methods=["POST"], endpoint="enroll"),
        Rule("/auth/v1/factors/<factor_id>/challenge", methods=["POST"], endpoint="challenge"),
        Rule("/auth/v1/factors/<factor_id>/verify", methods=["POST"], endpoint="verify_factor"),
        Rule("/auth/v1/factors/<factor_id>", methods=["DELETE"], endpoint="unenroll"),
        Rule("/auth/v1/admin/users", methods=["POST"], endpoint="create_user"),
        Rule("/auth/v1/admin/generate_link", methods=["POST"], endpoint="generate_link"),
        Rule("/auth/v1/admin/users/<user_id>", methods=["DELETE"], endpoint="delete_user"),
    ]
)


class Refused(Exception):
    """What GoTrue answers instead: status, error code and message."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


class GatewayRefused(Exception):
    """What the API gateway answers before Auth sees the request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class SigningKey:
    kid: str
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def pem(self) -> str:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    @classmethod
    def from_pem(cls, kid: str, pem: str) -> SigningKey:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cls(kid, key)


def hash_password(password: str) -> str:
    """A salted scrypt hash, as `auth.users.encrypted_password` keeps it here (GoTrue: bcrypt)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1)
    return f"$scrypt${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def password_matches(password: str, stored: str | None) -> bool:
    if not stored or not stored.startswith("$scrypt$"):
        return False
    _, _, salt, digest = stored.split("$")
    found = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=2**14, r=8, p=1)
    return hmac.compare_digest(found, base64.b64decode(digest))


def ensure_passwords(conn: psycopg.Connection[Any]) -> None:
    """`auth.users.encrypted_password`, which the local stand-in of Supabase's schema
    (supabase/local/auth_stand_in.sql) predates: added here, as GoTrue migrates its own schema
    when it starts; a real `auth` schema has it already."""
    conn.execute("alter table auth.users add column if not exists encrypted_password text")


def s256(verifier: str) -> str:
    """A PKCE S256 challenge: base64url(sha256(verifier)), unpadded."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def hook_claims(
    conn: psycopg.Connection[Any], claims: dict[str, Any], method: str
) -> dict[str, Any]:
    """The claims as the Custom Access Token Hook leaves them, called as Supabase Auth calls it
    (as `supabase_auth_admin`, with its event), inside the caller's transaction."""
    event = {"user_id": claims["sub"], "claims": claims, "authentication_method": method}
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("set local role supabase_auth_admin")
        cur.execute("select public.custom_access_token_hook(%s::jsonb)", (json.dumps(event),))
        row = cur.fetchone()
        cur.execute("reset role")
    answer = row[0] if row else None
    if not isinstance(answer, dict) or not isinstance(answer.get("claims"), dict):
        raise RuntimeError("the custom access token hook gave no claims: are migrations applied?")
    hooked: dict[str, Any] = answer["claims"]
    return hooked


class AuthStandIn:
    """A WSGI app holding what Supabase Auth holds beside `auth.users`: sessions, refresh tokens,
    one-time tokens, PKCE flow states and signing keys.

    `url` is the project URL (SUPABASE_URL, without `/auth/v1`); `site_url` and `allow_list`
    (glob patterns, as Supabase's "Redirect URLs") decide where links may land; `origins` the
    browsers' origins CORS answers; `publishable_keys` the keys the gateway takes (None: any),
    `secret_keys` those the admin routes take; `outbox` where magic links are mailed.
    """

    def __init__(
        self,
        *,
        database_url: str | None = None,
        site_url: str = "http://localhost:8080",
        allow_list: tuple[str, ...] = (),
        origins: frozenset[str] = frozenset(),
        publishable_keys: frozenset[str] | None = None,
        secret_keys: frozenset[str] = frozenset({SECRET_KEY}),
        jwt_secret: str | None = None,
        outbox: Path | None = None,
        sender: str = "Supabase Auth <noreply@example.com>",
        state: Path | None = None,
    ) -> None:
        self.url = ""
        self.database_url = database_url
        self.site_url = site_url
        self.allow_list = allow_list
        self.origins = origins
        self.publishable_keys = publishable_keys
        self.secret_keys = secret_keys
        self.jwt_secret = jwt_secret
        self.outbox = outbox
        self.sender = sender
        self.state = state
        self.otp_expiry = OTP_EXPIRY
        self.lock = threading.RLock()
        self.requests: list[Recorded] = []
        # Every link made (`/otp` mailed, `generate_link` returned), oldest first.
        self.links: list[str] = []
        # The next this many `generate_link` calls find Auth unavailable (503 from the gateway,
        # as in an outage or a restart).
        self.unavailable = 0
        self.signing = SigningKey("local-key-1")
        self.standby = SigningKey("local-key-2")
        self.previous: SigningKey | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.refresh_tokens: dict[str, dict[str, Any]] = {}
        self.one_time: dict[str, dict[str, Any]] = {}
        self.flows: dict[str, dict[str, Any]] = {}
        # MFA factors by id (their user, type, status, TOTP secret) and their challenges.
        self.factors: dict[str, dict[str, Any]] = {}
        self.challenges: dict[str, dict[str, Any]] = {}
        # Users a test names without a row in `auth.users` (`issue_code`), by id.
        self.unstored: dict[str, dict[str, Any]] = {}
        self._column_ready = False
        self._load()

    # What a test asks of it.

    def reset(self) -> None:
        """Nothing recorded, no sessions, codes or links; the keys stay (tokens stay checkable)."""
        with self.lock:
            self.requests.clear()
            self.links.clear()
            self.unavailable = 0
            for held in (
                self.sessions,
                self.refresh_tokens,
                self.one_time,
                self.flows,
                self.factors,
                self.challenges,
            ):
                held.clear()
            self.unstored.clear()

    def calls(self, method: str, path_prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    @property
    def issuer(self) -> str:
        """The `iss` Supabase Auth writes: the project URL + /auth/v1."""
        return f"{self.url}/auth/v1"

    @property
    def kid(self) -> str:
        return self.signing.kid

    @property
    def signing_key(self) -> ec.EllipticCurvePrivateKey:
        return self.signing.key

    def rotate(self) -> None:
        """The standby key signs from now on; a new standby is published; the retired key
        stays in the JWKS (tokens it signed are still live) until `revoke_previous`."""
        with self.lock:
            self.previous, self.signing = self.signing, self.standby
            number = int(self.signing.kid.rsplit("-", 1)[-1]) + 1
            self.standby = SigningKey(f"local-key-{number}")
            self._save()

    def revoke_previous(self) -> None:
        with self.lock:
            self.previous = None
            self._save()

    def es256_token(self, *, sub: str, email: str, exp_in: int = 3600) -> str:
        """An access token signed with the current key, with Supabase's base claims only."""
        claims = access_claims(user_id=sub, email=email, supabase_url=self.url, ttl=exp_in)
        return self._sign(claims)

    def issue_code(
        self,
        *,
        verifier: str,
        user_id: str,
        email: str,
        created_at: str = "2026-01-01T10:00:00Z",
        name: str | None = None,
    ) -> str:
        """A PKCE auth code (challenge `plain`) for a user created at `created_at` (ISO), as
        `/verify` would hand one; the user need not be in `auth.users`."""
        meta = {"full_name": name} if name else {}
        with self.lock:
            self.unstored[user_id] = _user_json(
                {"id": user_id, "email": email, "meta": meta, "created_at": created_at}
            )
            return self._flow(user_id, challenge=verifier, method="plain", via="otp", issued=True)

    # The WSGI app.

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        # Mounted under /auth/v1 beside the API (dev/stack.py), or served alone: the same paths.
        environ = {
            **environ,
            "PATH_INFO": environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""),
            "SCRIPT_NAME": "",
        }
        request = Request(environ)
        body = request.get_data()
        with self.lock:
            self.requests.append(
                Recorded(
                    request.method,
                    request.path,
                    dict(request.headers),
                    list(request.args.items(multi=True)),
                    body,
                )
            )
        if request.method == "OPTIONS":
            response = self._cors(request, Response(status=204))
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, PUT, DELETE, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Access-Control-Max-Age"] = "86400"
            return response(environ, start_response)
        try:
            endpoint, args = _ROUTES.bind_to_environ(environ).match()
            # A link a person clicks carries no key; the JWKS is public, as Supabase serves it.
            if endpoint not in ("verify", "jwks"):
                self._gateway(
                    request, admin=endpoint in ("create_user", "generate_link", "delete_user")
                )
            response = getattr(self, endpoint)(request, **args)
        except GatewayRefused as exc:
            response = _json({"message": exc.message}, exc.status)
        except Refused as exc:
            response = self._error(request, exc)
        except HTTPException:
            response = _json({"message": "no Route matched with those values"}, 404)
        response.headers["X-Supabase-Api-Version"] = API_VERSION
        return self._cors(request, response)(environ, start_response)

    def _gateway(self, request: Request, *, admin: bool) -> None:
        key = request.headers.get("apikey")
        if not key:
            raise GatewayRefused(401, "No API key found in request")
        _, _, bearer = request.headers.get("Authorization", "").partition(" ")
        if bearer and not (bearer == key or bearer.count(".") == 2):
            raise GatewayRefused(401, "Invalid authorization header")
        known = key in self.secret_keys or (
            self.publishable_keys is None or key in self.publishable_keys
        )
        if not known:
            raise GatewayRefused(401, "Invalid API key")
        if admin and key not in self.secret_keys:
            raise Refused(401, "no_authorization", "This endpoint requires a secret API key")

    def _cors(self, request: Request, response: Response) -> Response:
        origin = request.headers.get("Origin")
        if origin and origin.rstrip("/") in self.origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = "X-Supabase-Api-Version"
            response.vary.add("Origin")
        return response

    def _error(self, request: Request, exc: Refused) -> Response:
        """GoTrue's error body: `{code, message}` for clients that send API version
        2024-01-01 or later (supabase-js, supabase-py), else `{code, error_code, msg}`."""
        version = request.headers.get("X-Supabase-Api-Version", "")
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", version) and version >= API_VERSION:
            body: dict[str, Any] = {"code": exc.code, "message": exc.message}
        else:
            body = {"code": exc.status, "error_code": exc.code, "msg": exc.message}
        return _json({**body, **exc.extra}, exc.status)

    # Sign-up and sign-in.

    def signup(self, request: Request) -> Response:
        body = _body(request)
        email, password = _email(body.get("email")), body.get("password")
        if not isinstance(password, str) or not password:
            raise Refused(422, "validation_failed", "Signup requires a valid password")
        _strong_enough(password)
        meta = body.get("data") if isinstance(body.get("data"), dict) else {}
        with self._db() as conn:
            row = conn.execute(
                "insert into auth.users (id, email, raw_user_meta_data, encrypted_password,"
                " email_confirmed_at) values (%s, %s, %s, %s, now())"
                " on conflict ((lower(email))) do nothing returning id",
                (str(uuid.uuid4()), email, json.dumps(meta), hash_password(password)),
            ).fetchone()
            if row is None:
                raise Refused(422, "user_already_exists", "User already registered")
            user = self._user(conn, user_id=str(row["id"]))
        return _json(self._session(user, "password"))

    def token(self, request: Request) -> Response:
        grant = request.args.get("grant_type")
        body = _body(request)
        if grant == "password":
            return _json(self._password(body))
        if grant == "refresh_token":
            return _json(self._refresh(body.get("refresh_token")))
        if grant == "pkce":
            return _json(self._exchange(body.get("auth_code"), body.get("code_verifier")))
        raise Refused(400, "unsupported_grant_type", f"unsupported grant type: {grant}")

    def _password(self, body: dict[str, Any]) -> dict[str, Any]:
        email, password = body.get("email"), body.get("password")
        if not isinstance(email, str) or not isinstance(password, str):
            raise Refused(400, "validation_failed", "missing email or phone")
        with self._db() as conn:
            row = self._row(conn, email=email)
        if row is None or not password_matches(password, row["encrypted_password"]):
            raise Refused(400, "invalid_credentials", "Invalid login credentials")
        return self._session(_user_json(row), "password")

    def _refresh(self, token: Any) -> dict[str, Any]:
        with self.lock:
            found = self.refresh_tokens.get(token) if isinstance(token, str) else None
            if found is None or found["session_id"] not in self.sessions:
                raise Refused(
                    400, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found"
                )
            if found["revoked"]:
                # Reuse detection: a spent token presented again ends its whole session.
                self._end_sessions([found["session_id"]])
                raise Refused(
                    400, "refresh_token_already_used", "Invalid Refresh Token: Already Used"
                )
            found["revoked"] = True
            session = self.sessions[found["session_id"]]
        user = self._current_user(session["user_id"])
        return self._session(user, session["method"], session_id=found["session_id"])

    def _exchange(self, code: Any, verifier: Any) -> dict[str, Any]:
        with self.lock:
            flow = self.flows.get(code) if isinstance(code, str) else None
            if flow is None or not flow["issued"] or time.time() > flow["expires"]:
                raise Refused(
                    404, "flow_state_not_found", "invalid flow state, no valid flow state found"
                )
            wanted = s256(str(verifier)) if flow["method"] == "s256" else str(verifier)
            if not verifier or not hmac.compare_digest(wanted, flow["challenge"]):
                raise Refused(
                    400,
                    "bad_code_verifier",
                    "code challenge does not match previously saved code verifier",
                )
            del self.flows[code]
            self._save()
        user = self._current_user(flow["user_id"])
        return self._session(user, flow["via"])

    # Magic links.

    def otp(self, request: Request) -> Response:
        body = _body(request)
        email = _email(body.get("email"))
        challenge, method = _challenge(body)
        redirect = self._redirect(request.args.get("redirect_to") or body.get("redirect_to"))
        with self._db() as conn:
            row = self._row(conn, email=email)
            if row is None:
                if body.get("create_user") is False:
                    raise Refused(422, "otp_disabled", "Signups not allowed for otp")
                meta = body.get("data") if isinstance(body.get("data"), dict) else {}
                conn.execute(
                    "insert into auth.users (id, email, raw_user_meta_data) values (%s, %s, %s)"
                    " on conflict ((lower(email))) do nothing",
                    (str(uuid.uuid4()), email, json.dumps(meta)),
                )
                row = self._row(conn, email=email)
        assert row is not None
        link = self._link(str(row["id"]), "magiclink", redirect, challenge=challenge, method=method)
        self._mail(row["email"], link)
        return _json({})

    def verify(self, request: Request) -> Response:
        redirect = self._redirect(request.args.get("redirect_to"))
        with self.lock:
            found = self.one_time.pop(request.args.get("token", ""), None)
            self._save()
        if (
            found is None
            or time.time() > found["expires"]
            or (found["type"] != request.args.get("type"))
        ):
            error = {
                "error": "access_denied",
                "error_code": "otp_expired",
                "error_description": "Email link is invalid or has expired",
            }
            return _redirect(f"{redirect}#{urlencode(error)}")
        with self._db() as conn:
            conn.execute(
                "update auth.users set email_confirmed_at = coalesce(email_confirmed_at, now())"
                " where id = %s",
                (found["user_id"],),
            )
        if found.get("flow"):
            with self.lock:
                flow = self.flows[found["flow"]]
                flow["issued"], flow["expires"] = True, time.time() + FLOW_STATE_EXPIRY
                self._save()
            joiner = "&" if "?" in redirect else "?"
            return _redirect(f"{redirect}{joiner}{urlencode({'code': found['flow']})}")
        session = self._session(self._current_user(found["user_id"]), "otp")
        fragment = {
            "access_token": session["access_token"],
            "expires_at": session["expires_at"],
            "expires_in": session["expires_in"],
            "refresh_token": session["refresh_token"],
            "token_type": "bearer",
            "type": found["type"],
        }
        return _redirect(f"{redirect}#{urlencode(fragment)}")

    # The signed-in user.

    def user(self, request: Request) -> Response:
        claims = self._bearer(request)
        user_id = str(claims["sub"])
        return _json({**self._current_user(user_id), **self._factors_json(user_id)})

    # Multi-factor authentication (GoTrue's internal/api/mfa.go, TOTP only).

    def enroll(self, request: Request) -> Response:
        claims = self._bearer(request)
        body = _body(request)
        kind = body.get("factor_type")
        if kind in ("phone", "webauthn"):
            raise Refused(
                422, f"mfa_{kind}_enroll_not_enabled", f"MFA enroll is disabled for {kind}"
            )
        if kind != "totp":
            raise Refused(
                400, "validation_failed", "factor_type needs to be totp, phone, or webauthn"
            )
        user_id = str(claims["sub"])
        name = body.get("friendly_name") if isinstance(body.get("friendly_name"), str) else ""
        issuer = body.get("issuer") if isinstance(body.get("issuer"), str) else ""
        issuer = issuer or urlsplit(self.site_url).netloc
        with self.lock:
            mine = [f for f in self.factors.values() if f["user_id"] == user_id]
            if name and any(f["friendly_name"] == name for f in mine):
                raise Refused(
                    422,
                    "mfa_factor_name_conflict",
                    f"A factor with the friendly name {name!r} for this user already exists",
                )
            if len(mine) >= MAX_FACTORS:
                raise Refused(
                    422,
                    "too_many_enrolled_mfa_factors",
                    "Maximum number of verified factors reached, unenroll to continue",
                )
            if any(f["status"] == "verified" for f in mine) and claims.get("aal") != "aal2":
                raise Refused(403, "insufficient_aal", "AAL2 required to enroll a new factor")
        secret = pyotp.random_base32()
        uri = pyotp.TOTP(secret).provisioning_uri(
            name=str(claims.get("email") or user_id), issuer_name=issuer
        )
        factor_id = str(uuid.uuid4())
        now = _iso(datetime.now(UTC))
        with self.lock:
            self.factors[factor_id] = {
                "id": factor_id,
                "user_id": user_id,
                "friendly_name": name,
                "factor_type": "totp",
                "status": "unverified",
                "secret": secret,
                "created_at": now,
                "updated_at": now,
            }
            self._save()
        # A standalone SVG document (its namespace declared), as GoTrue answers it: a browser
        # shows it from a `data:image/svg+xml` address.
        svg = io.BytesIO()
        segno.make(uri, error="h").save(svg, kind="svg", xmldecl=False, svgns=True, scale=3)
        qr = svg.getvalue().decode()
        return _json(
            {
                "id": factor_id,
                "type": "totp",
                "friendly_name": name,
                "totp": {"qr_code": qr, "secret": secret, "uri": uri},
            }
        )

    def challenge(self, request: Request, factor_id: str) -> Response:
        claims = self._bearer(request)
        factor = self._factor(str(claims["sub"]), factor_id)
        challenge_id = str(uuid.uuid4())
        expires = int(time.time()) + MFA_CHALLENGE_EXPIRY
        with self.lock:
            self.challenges[challenge_id] = {
                "factor_id": factor["id"],
                "expires": expires,
                "verified": False,
            }
            self._save()
        return _json({"id": challenge_id, "type": "totp", "expires_at": expires})

    def verify_factor(self, request: Request, factor_id: str) -> Response:
        claims = self._bearer(request)
        user_id = str(claims["sub"])
        factor = self._factor(user_id, factor_id)
        body = _body(request)
        code = body.get("code")
        if not isinstance(code, str) or not code:
            raise Refused(400, "validation_failed", "Code needs to be non-empty")
        with self.lock:
            challenge = self.challenges.get(str(body.get("challenge_id")))
            if challenge is None or challenge["factor_id"] != factor["id"]:
                raise Refused(
                    422,
                    "mfa_factor_not_found",
                    "MFA factor with the provided challenge ID not found",
                )
            if challenge["verified"]:
                raise Refused(
                    422, "mfa_ip_address_mismatch", "Challenge and verify IP addresses mismatch."
                )
            if time.time() > challenge["expires"]:
                del self.challenges[str(body.get("challenge_id"))]
                self._save()
                raise Refused(
                    422,
                    "mfa_challenge_expired",
                    f"MFA challenge {body.get('challenge_id')} has expired, verify against"
                    " another challenge or create a new challenge.",
                )
        # As GoTrue: six digits, thirty seconds, one step of clock skew either way.
        if not pyotp.TOTP(factor["secret"]).verify(code, valid_window=1):
            raise Refused(422, "mfa_verification_failed", "Invalid TOTP code entered")
        session_id = str(claims.get("session_id"))
        with self.lock:
            challenge["verified"] = True
            factor["status"] = "verified"
            factor["updated_at"] = _iso(datetime.now(UTC))
            session = self.sessions[session_id]
            session["mfa_at"], session["factor_id"] = int(time.time()), factor["id"]
            # As GoTrue: the user's other sessions below aal2 end; unverified TOTP factors go.
            ended = [
                sid
                for sid, held in self.sessions.items()
                if held["user_id"] == user_id and not held.get("mfa_at")
            ]
            self._end_sessions(ended)
            for other in [
                fid
                for fid, f in self.factors.items()
                if f["user_id"] == user_id and f["status"] == "unverified"
            ]:
                del self.factors[other]
            self._save()
        return _json(self._session(self._current_user(user_id), "totp", session_id=session_id))

    def unenroll(self, request: Request, factor_id: str) -> Response:
        claims = self._bearer(request)
        factor = self._factor(str(claims["sub"]), factor_id)
        if factor["status"] == "verified" and claims.get("aal") != "aal2":
            raise Refused(422, "insufficient_aal", "AAL2 required to unenroll verified factor")
        with self.lock:
            del self.factors[factor["id"]]
            for held in self.sessions.values():
                if held.get("factor_id") == factor["id"]:
                    held.pop("mfa_at", None)
                    held.pop("factor_id", None)
            self._save()
        return _json({"id": factor["id"]})

    def _factor(self, user_id: str, factor_id: str) -> dict[str, Any]:
        """The user's own factor, as GoTrue loads it: another user's is not found."""
        try:
            uuid.UUID(factor_id)
        except ValueError:
            raise Refused(404, "validation_failed", "factor_id must be an UUID") from None
        with self.lock:
            factor = self.factors.get(factor_id)
        if factor is None or factor["user_id"] != user_id:
            raise Refused(404, "mfa_factor_not_found", "Factor not found")
        return factor

    def _factors_json(self, user_id: str) -> dict[str, Any]:
        """`factors` as GoTrue adds them to a user (left out when there are none)."""
        with self.lock:
            mine = [f for f in self.factors.values() if f["user_id"] == user_id]
        shown = ("id", "friendly_name", "factor_type", "status", "created_at", "updated_at")
        return {"factors": [{k: f[k] for k in shown} for f in mine]} if mine else {}

    def logout(self, request: Request) -> Response:
        claims = self._bearer(request)
        scope = request.args.get("scope", "global")
        with self.lock:
            mine = [s for s, held in self.sessions.items() if held["user_id"] == claims["sub"]]
            current = str(claims.get("session_id"))
            ended: list[str]
            if scope == "local":
                ended = [current]
            elif scope == "others":
                ended = [s for s in mine if s != current]
            elif scope == "global":
                ended = mine
            else:
                raise Refused(400, "validation_failed", "Unsupported logout scope")
            self._end_sessions(ended)
        return Response(status=204)

    def _bearer(self, request: Request) -> dict[str, Any]:
        """The claims of the request's access token, checked as GoTrue checks them."""
        kind, _, token = request.headers.get("Authorization", "").partition(" ")
        if kind.lower() != "bearer" or token.count(".") != 2:
            raise Refused(401, "no_authorization", "This endpoint requires a valid Bearer token")
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") == "HS256" and self.jwt_secret:
                key: Any = self.jwt_secret
            else:
                key = self._published().get(str(header.get("kid")))
                if key is None:
                    raise jwt.InvalidTokenError("unknown signing key")
                key = key.public_key()
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["HS256" if isinstance(key, str) else "ES256"],
                audience="authenticated",
            )
        except jwt.PyJWTError as exc:
            raise Refused(
                403, "bad_jwt", f"invalid JWT: unable to parse or verify signature, {exc}"
            ) from exc
        with self.lock:
            if claims.get("session_id") not in self.sessions:
                raise Refused(
                    403,
                    "session_not_found",
                    "Session from session_id claim in JWT does not exist",
                )
        return claims

    # The admin routes.

    def create_user(self, request: Request) -> Response:
        body = _body(request)
        email = _email(body.get("email"))
        meta = body.get("user_metadata") if isinstance(body.get("user_metadata"), dict) else {}
        password = body.get("password")
        with self._db() as conn:
            created = conn.execute(
                "insert into auth.users (id, email, raw_user_meta_data, encrypted_password,"
                " email_confirmed_at) values (%s, %s, %s, %s, case when %s then now() end)"
                " on conflict ((lower(email))) do nothing returning id",
                (
                    str(uuid.uuid4()),
                    email,
                    json.dumps(meta),
                    hash_password(password) if isinstance(password, str) and password else None,
                    bool(body.get("email_confirm")),
                ),
            ).fetchone()
            if created is None:
                raise Refused(
                    422,
                    "email_exists",
                    "A user with this email address has already been registered",
                )
            user = self._user(conn, user_id=str(created["id"]))
        return _json(user)

    def delete_user(self, request: Request, user_id: str) -> Response:
        """As GoTrue's admin delete (hard): the user goes from auth.users, the project's
        cascades follow, their sessions end; `unavailable` answers 503 as for a sign-in link."""
        if self.unavailable > 0:
            with self.lock:
                self.unavailable -= 1
            return _json(
                {"message": "An invalid response was received from the upstream server"}, 503
            )
        try:
            uuid.UUID(user_id)
        except ValueError:
            raise Refused(404, "user_not_found", "User not found") from None
        with self._db() as conn:
            gone = conn.execute(
                "delete from auth.users where id = %s returning id", (user_id,)
            ).fetchone()
        if gone is None:
            raise Refused(404, "user_not_found", "User not found")
        with self.lock:
            for sid in [k for k, v in self.sessions.items() if v.get("user_id") == user_id]:
                del self.sessions[sid]
        return _json({})

    def generate_link(self, request: Request) -> Response:
        """As GoTrue: a magic link for an existing user, with the hashed token and redirect."""
        if self.unavailable > 0:
            with self.lock:
                self.unavailable -= 1
            return _json(
                {"message": "An invalid response was received from the upstream server"}, 503
            )
        body = _body(request)
        kind = body.get("type")
        if kind != "magiclink":
            raise Refused(400, "validation_failed", f"Invalid link type: {kind}")
        email = _email(body.get("email"))
        with self._db() as conn:
            row = self._row(conn, email=email)
        if row is None:
            raise Refused(404, "user_not_found", "User not found")
        redirect = self._redirect(request.args.get("redirect_to") or body.get("redirect_to"))
        link = self._link(str(row["id"]), kind, redirect)
        token = link.split("token=", 1)[1].split("&", 1)[0]
        return _json(
            {
                **_user_json(row),
                "action_link": link,
                "email_otp": f"{secrets.randbelow(10**6):06d}",
                "hashed_token": token,
                "redirect_to": redirect,
                "verification_type": kind,
            }
        )

    def jwks(self, request: Request) -> Response:
        keys = [
            {
                **jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True),
                "kid": kid,
                "alg": "ES256",
                "use": "sig",
                "key_ops": ["verify"],
            }
            for kid, key in self._published().items()
        ]
        return _json({"keys": keys})

    # Sessions and tokens.

    def _session(
        self, user: dict[str, Any], method: str, *, session_id: str | None = None
    ) -> dict[str, Any]:
        """A session as GoTrue answers it: a new access token, a new refresh token; a new
        session unless this refreshes `session_id`."""
        now = int(time.time())
        with self.lock:
            if session_id is None:
                session_id = str(uuid.uuid4())
                self.sessions[session_id] = {"user_id": user["id"], "method": method, "at": now}
            refresh = secrets.token_urlsafe(9)
            self.refresh_tokens[refresh] = {"session_id": session_id, "revoked": False}
            held = self.sessions[session_id]
            # GoTrue's `amr`: how the session was authenticated, the newest method first.
            amr = [
                *([{"method": "totp", "timestamp": held["mfa_at"]}] if held.get("mfa_at") else []),
                {"method": held["method"], "timestamp": held["at"]},
            ]
            aal = "aal2" if held.get("mfa_at") else "aal1"
            self._save()
        user = {**user, **self._factors_json(user["id"])}
        claims = access_claims(
            user_id=user["id"], email=user["email"], supabase_url=self.url, ttl=JWT_EXPIRY
        )
        claims |= {
            "session_id": session_id,
            "aal": aal,
            "amr": amr,
            "user_metadata": user["user_metadata"],
            "app_metadata": user["app_metadata"],
        }
        if self.database_url is not None:
            with self._db() as conn:
                claims = hook_claims(conn, claims, method)
        return {
            "access_token": self._sign(claims),
            "token_type": "bearer",
            "expires_in": JWT_EXPIRY,
            "expires_at": now + JWT_EXPIRY,
            "refresh_token": refresh,
            "user": user,
        }

    def _end_sessions(self, ended: list[str]) -> None:
        with self.lock:
            for session_id in ended:
                self.sessions.pop(session_id, None)
            for token in [t for t, r in self.refresh_tokens.items() if r["session_id"] in ended]:
                del self.refresh_tokens[token]
            self._save()

    def _sign(self, claims: dict[str, Any]) -> str:
        with self.lock:
            signing = self.signing
        return jwt.encode(claims, signing.key, algorithm="ES256", headers={"kid": signing.kid})

    def _published(self) -> dict[str, ec.EllipticCurvePrivateKey]:
        with self.lock:
            keys = [self.signing, self.standby, *([self.previous] if self.previous else [])]
        return {k.kid: k.key for k in keys}

    def _flow(
        self, user_id: str, *, challenge: str, method: str, via: str, issued: bool = False
    ) -> str:
        code = str(uuid.uuid4())
        with self.lock:
            self.flows[code] = {
                "user_id": user_id,
                "challenge": challenge,
                "method": method,
                "via": via,
                "issued": issued,
                "expires": time.time() + (FLOW_STATE_EXPIRY if issued else self.otp_expiry),
            }
            self._save()
        return code

    def _link(
        self,
        user_id: str,
        kind: str,
        redirect: str,
        *,
        challenge: str | None = None,
        method: str | None = None,
    ) -> str:
        """A one-time link to `/verify`, as GoTrue writes `ConfirmationURL`."""
        token = hashlib.sha224(secrets.token_bytes(32)).hexdigest()
        flow = (
            self._flow(user_id, challenge=challenge, method=method or "s256", via="otp")
            if challenge
            else None
        )
        with self.lock:
            self.one_time[token] = {
                "user_id": user_id,
                "type": kind,
                "flow": flow,
                "expires": time.time() + self.otp_expiry,
            }
            self._save()
        link = f"{self.issuer}/verify?" + urlencode(
            {"token": token, "type": kind, "redirect_to": redirect}
        )
        with self.lock:
            self.links.append(link)
        return link

    def _mail(self, email: str, link: str) -> None:
        """The magic link mail, in GoTrue's default template, to the outbox."""
        log.info("magic link for %s: %s", email, link)
        if self.outbox is None:
            return
        OutboxMailer(self.outbox).send(
            OutgoingEmail(
                to=(email,),
                subject="Your Magic Link",
                text=f"Magic Link\n\nFollow this link to login:\n{link}\n",
                html=(
                    "<h2>Magic Link</h2><p>Follow this link to login:</p>"
                    f'<p><a href="{html.escape(link)}">Log In</a></p>'
                ),
                from_=self.sender,
            )
        )

    def _redirect(self, wanted: Any) -> str:
        """`wanted` if GoTrue would redirect there, else the site (GoTrue's
        IsRedirectURLValid: the site's scheme, host and port, any port on loopback, or a
        pattern of the allow list)."""
        if not isinstance(wanted, str) or not wanted or re.search(r"[\x00-\x20\x7f]", wanted):
            return self.site_url
        site, there = urlsplit(self.site_url), urlsplit(wanted)
        try:
            same_port = site.port == there.port or (there.hostname or "") in LOOPBACK
        except ValueError:
            return self.site_url
        if site.hostname == there.hostname and site.scheme == there.scheme and same_port:
            return wanted
        if any(_glob(pattern).fullmatch(wanted) for pattern in self.allow_list):
            return wanted
        return self.site_url

    # Users in `auth.users`.

    @contextlib.contextmanager
    def _db(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        if self.database_url is None:
            raise Refused(500, "unexpected_failure", "the stand-in has no database")
        with psycopg.connect(self.database_url, row_factory=dict_row) as conn:
            if not self._column_ready:
                ensure_passwords(conn)
                self._column_ready = True
            yield conn

    def _row(
        self,
        conn: psycopg.Connection[dict[str, Any]],
        *,
        email: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any] | None:
        row: dict[str, Any] | None = conn.execute(
            "select id::text, email, raw_user_meta_data as meta, encrypted_password,"
            " email_confirmed_at, created_at, updated_at from auth.users"
            " where lower(email) = lower(%s) or id::text = %s",
            (email, user_id),
        ).fetchone()
        return row

    def _user(self, conn: psycopg.Connection[dict[str, Any]], *, user_id: str) -> dict[str, Any]:
        row = self._row(conn, user_id=user_id)
        if row is None:
            raise Refused(404, "user_not_found", "User not found")
        return _user_json(row)

    def _current_user(self, user_id: str) -> dict[str, Any]:
        """The user as `auth.users` holds them now, or as a test named them."""
        with self.lock:
            unstored = self.unstored.get(user_id)
        if unstored is not None:
            return unstored
        with self._db() as conn:
            return self._user(conn, user_id=user_id)

    # What survives a restart.

    def _load(self) -> None:
        if self.state is None or not self.state.exists():
            return
        held = json.loads(self.state.read_text())
        self.signing = SigningKey.from_pem(*held["signing"])
        self.standby = SigningKey.from_pem(*held["standby"])
        self.previous = SigningKey.from_pem(*held["previous"]) if held.get("previous") else None
        self.sessions = held.get("sessions", {})
        self.refresh_tokens = held.get("refresh_tokens", {})
        self.one_time = held.get("one_time", {})
        self.flows = held.get("flows", {})
        self.factors = held.get("factors", {})
        self.challenges = held.get("challenges", {})

    def _save(self) -> None:
        if self.state is None:
            return
        with self.lock:
            held = {
                "signing": [self.signing.kid, self.signing.pem()],
                "standby": [self.standby.kid, self.standby.pem()],
                "previous": [self.previous.kid, self.previous.pem()] if self.previous else None,
                "sessions": self.sessions,
                "refresh_tokens": self.refresh_tokens,
                "one_time": self.one_time,
                "flows": self.flows,
                "factors": self.factors,
                "challenges": self.challenges,
            }
            self.state.parent.mkdir(parents=True, exist_ok=True)
            partial = self.state.with_suffix(".partial")
            partial.write_text(json.dumps(held))
            partial.replace(self.state)


def _user_json(row: dict[str, Any]) -> dict[str, Any]:
    """A user as GoTrue answers one."""
    confirmed = _iso(row.get("email_confirmed_at"))
    created = _iso(row.get("created_at")) or _iso(datetime.now(UTC))
    return {
        "id": str(row["id"]),
        "aud": "authenticated",
        "role": "authenticated",
        "email": row["email"],
        "email_confirmed_at": confirmed,
        "phone": "",
        "confirmed_at": confirmed,
        "app_metadata": {"provider": "email", "providers": ["email"]},
        "user_metadata": row.get("meta") or {},
        "identities": [],
        "created_at": created,
        "updated_at": _iso(row.get("updated_at")) or created,
        "is_anonymous": False,
    }


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)


def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.get_data() or b"{}")
    except ValueError as exc:
        raise Refused(400, "bad_json", "Could not parse request body as JSON") from exc
    if not isinstance(body, dict):
        raise Refused(400, "bad_json", "Could not parse request body as JSON")
    return body


def _email(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", value):
        raise Refused(400, "validation_failed", "Unable to validate email address: invalid format")
    return value.strip()


def _strong_enough(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise Refused(
            422,
            "weak_password",
            f"Password should be at least {MIN_PASSWORD} characters.",
            weak_password={"reasons": ["length"]},
        )


def _challenge(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The PKCE challenge a client sent, with its method (`s256` or `plain`)."""
    challenge, method = body.get("code_challenge"), body.get("code_challenge_method")
    if not challenge:
        return None, None
    method = str(method or "").lower()
    if method not in ("s256", "plain") or not isinstance(challenge, str):
        raise Refused(400, "validation_failed", "Invalid code_challenge_method")
    return challenge, method


def _glob(pattern: str) -> re.Pattern[str]:
    """A redirect allow-list pattern as GoTrue reads it: `*` stops at `.` and `/`, `**` not."""
    parts = re.split(r"(\*\*|\*|\?)", pattern)
    wild = {"**": ".*", "*": r"[^./]*", "?": r"[^./]"}
    return re.compile("".join(wild.get(p, re.escape(p)) for p in parts))


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def _redirect(location: str) -> Response:
    return Response(status=303, headers={"Location": location})


@contextlib.contextmanager
def running(**options: Any) -> Iterator[AuthStandIn]:
    """The stand-in on a free loopback port, for the duration of the block."""
    app = AuthStandIn(**options)
    with loopback.serving(app, name="auth-stand-in") as app.url:
        yield app
