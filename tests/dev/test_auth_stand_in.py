"""The Supabase Auth stand-in (dev/auth_stand_in.py) over HTTP, driven by supabase-py's auth
client as supabase-js drives GoTrue: sign-up, password and magic-link sign-in (PKCE, through the
API's /api/auth/callback), single-use refresh tokens carrying the access hook's claims, user,
logout, redirect allow list, gateway and CORS; a second factor (TOTP, real codes) enrolled,
verified to `aal2` and removed through `auth.mfa`."""

from __future__ import annotations

import email
import email.policy
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pyotp
import pytest
import requests
from supabase_auth import SyncGoTrueClient, SyncMemoryStorage
from supabase_auth.errors import AuthApiError, AuthWeakPasswordError

from adapters.db.pool import Database
from adapters.supabase_auth import encode_value, read_session, storage_key
from adapters.tokens import TokenVerifier
from config import Settings, SettingsError
from core.errors import ServiceError
from dev import local_users
from dev.auth_stand_in import AuthStandIn, running
from dev.samples.catalogue import seed_demo_products
from dev.stack import with_auth_stand_in
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.fakes.supabase import PUBLISHABLE_KEY, SECRET_KEY
from tests.helpers import HANG_GUARD, stripe_event, wait_for
from tests.test_config import PRODUCTION


@pytest.fixture
def auth(fakes: Any, db: Database) -> AuthStandIn:
    stand_in: AuthStandIn = fakes[1]
    return stand_in


def client(auth: AuthStandIn, storage: SyncMemoryStorage | None = None) -> SyncGoTrueClient:
    """A browser's client: the publishable key, PKCE, the session kept in `storage`."""
    return SyncGoTrueClient(
        url=f"{auth.url}/auth/v1",
        headers={"apikey": PUBLISHABLE_KEY, "Authorization": f"Bearer {PUBLISHABLE_KEY}"},
        storage=storage or SyncMemoryStorage(),
        flow_type="pkce",
        auto_refresh_token=False,
    )


def claims(token: str, auth: AuthStandIn) -> dict[str, Any]:
    """The token's claims, its signature checked against the stand-in's JWKS."""
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "ES256"
    keys = requests.get(f"{auth.url}/auth/v1/.well-known/jwks.json", timeout=HANG_GUARD).json()
    [key] = [k for k in keys["keys"] if k["kid"] == header["kid"]]
    decoded: dict[str, Any] = jwt.decode(
        token, jwt.PyJWK(key).key, algorithms=["ES256"], audience="authenticated"
    )
    return decoded


def last_mail(auth: AuthStandIn) -> email.message.EmailMessage:
    assert auth.outbox is not None
    path = sorted(Path(auth.outbox).glob("*.eml"))[-1]
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    assert isinstance(message, email.message.EmailMessage)
    return message


def test_sign_up_then_sign_in_with_a_password(auth: AuthStandIn, db: Database) -> None:
    signed_up = client(auth).sign_up({"email": "pw@example.com", "password": "correct horse"})
    assert signed_up.user is not None
    assert signed_up.session is not None  # confirmed at once, as the CLI's local stack does
    # A row of auth.users, as `flask users` reads them.
    [row] = db.fetch_all("select id::text from auth.users where email = 'pw@example.com'")
    assert row["id"] == signed_up.user.id

    session = (
        client(auth)
        .sign_in_with_password({"email": "PW@example.com", "password": "correct horse"})
        .session
    )
    assert session is not None
    found = claims(session.access_token, auth)
    assert found["sub"] == signed_up.user.id
    assert found["iss"] == auth.issuer
    # The access token hook's claims.
    assert found["has_access"] is False
    assert found["features"] == []
    assert found["amr"][0]["method"] == "password"
    # The API's own verifier accepts it (ES256, through the JWKS).
    verifier = TokenVerifier(jwt_secret=None, supabase_url=auth.url, timeout=5)
    assert verifier.verify(session.access_token).id == signed_up.user.id


@pytest.mark.parametrize(
    ("credentials", "status", "code"),
    [
        ({"email": "pw2@example.com", "password": "wrong one"}, 400, "invalid_credentials"),
        ({"email": "nobody@example.com", "password": "whatever"}, 400, "invalid_credentials"),
    ],
)
def test_wrong_credentials_are_refused_as_gotrue_refuses_them(
    auth: AuthStandIn, credentials: dict[str, str], status: int, code: str
) -> None:
    client(auth).sign_up({"email": "pw2@example.com", "password": "the right one"})
    with pytest.raises(AuthApiError) as refused:
        client(auth).sign_in_with_password(credentials)  # type: ignore[arg-type]
    assert (refused.value.status, refused.value.code) == (status, code)
    assert refused.value.message == "Invalid login credentials"


def test_sign_up_refuses_a_weak_password_and_a_taken_address(auth: AuthStandIn) -> None:
    with pytest.raises(AuthWeakPasswordError) as weak:
        client(auth).sign_up({"email": "weak@example.com", "password": "12345"})
    assert (weak.value.status, weak.value.code) == (422, "weak_password")
    assert weak.value.reasons == ["length"]
    client(auth).sign_up({"email": "taken@example.com", "password": "long enough"})
    with pytest.raises(AuthApiError) as taken:
        client(auth).sign_up({"email": "Taken@example.com", "password": "another one"})
    assert (taken.value.status, taken.value.code) == (422, "user_already_exists")
    # A client without the API version gets GoTrue's older error body.
    old = requests.post(
        f"{auth.url}/auth/v1/signup",
        json={"email": "bad address", "password": "long enough"},
        headers={"apikey": PUBLISHABLE_KEY},
        timeout=HANG_GUARD,
    )
    assert old.status_code == 400
    assert old.json()["error_code"] == "validation_failed"


def test_refresh_tokens_are_single_use_and_reuse_ends_the_session(auth: AuthStandIn) -> None:
    browser = client(auth)
    first = browser.sign_up({"email": "rt@example.com", "password": "long enough"}).session
    assert first is not None
    second = browser.refresh_session().session
    assert second is not None
    assert second.refresh_token != first.refresh_token
    assert (
        claims(second.access_token, auth)["session_id"]
        == claims(first.access_token, auth)["session_id"]
    )
    # The spent token, presented again (a stolen copy): refused, and the session ends. (These
    # codes are auth-js's; supabase-py's list of codes lacks them.)
    with pytest.raises(AuthApiError) as reused:
        client(auth).refresh_session(first.refresh_token)
    assert (reused.value.status, str(reused.value.code)) == (400, "refresh_token_already_used")
    with pytest.raises(AuthApiError) as ended:
        client(auth).refresh_session(second.refresh_token)
    assert str(ended.value.code) == "refresh_token_not_found"


def test_a_refresh_after_a_purchase_carries_the_new_claims(
    auth: AuthStandIn, api: Api, db: Database
) -> None:
    seed_demo_products(db)
    browser = client(auth)
    session = browser.sign_up({"email": "buyer@example.com", "password": "long enough"}).session
    assert session is not None
    assert session.user is not None
    assert claims(session.access_token, auth)["has_access"] is False

    post_event(api, stripe_event("checkout.session.completed", completed(session.user.id)))
    wait_for(lambda: db.fetch_all("select 1 from public.profiles where has_access"))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    refreshed = browser.refresh_session().session
    assert refreshed is not None
    after = claims(refreshed.access_token, auth)
    assert after["has_access"] is True
    assert after["features"]  # the team plan's features
    # The API takes the refreshed token and says the same.
    me = api.get("/api/me", headers={"Authorization": f"Bearer {refreshed.access_token}"})
    assert me.status_code == 200, me.text
    assert me.json()["hasAccess"] is True


def test_a_magic_link_signs_in_through_the_api_callback_with_pkce(
    auth: AuthStandIn, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The project's "Redirect URLs" list the API's callback, as docs/deploy/ says.
    monkeypatch.setattr(auth, "allow_list", (f"{api.url}/api/auth/callback",))
    storage = SyncMemoryStorage()
    callback = f"{api.url}/api/auth/callback"
    client(auth, storage).sign_in_with_otp(
        {"email": "magic@example.com", "options": {"email_redirect_to": callback}}
    )
    [verifier] = storage.storage.values()  # supabase-js keeps it in a cookie, @supabase/ssr

    mail = last_mail(auth)
    assert mail["To"] == "magic@example.com"
    assert mail["Subject"] == "Your Magic Link"
    link = auth.links[-1]
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None
    assert link in body.get_content()
    assert link.startswith(f"{auth.url}/auth/v1/verify?")
    assert parse_qs(urlsplit(link).query)["type"] == ["magiclink"]

    clicked = requests.get(link, allow_redirects=False, timeout=HANG_GUARD)
    assert clicked.status_code == 303
    landed = clicked.headers["Location"]
    assert landed.startswith(callback + "?code=")

    key = storage_key(auth.url)
    done = api.get(
        landed.removeprefix(api.url), cookies={f"{key}-code-verifier": encode_value(verifier)}
    )
    assert done.status_code == 302
    assert done.headers["Location"] == "/dashboard"
    session = read_session(key, {c.name: c.value or "" for c in done.cookies})
    assert session is not None
    assert session["user"]["email"] == "magic@example.com"
    assert claims(session["access_token"], auth)["amr"][0]["method"] == "otp"

    # The link works once.
    again = requests.get(link, allow_redirects=False, timeout=HANG_GUARD)
    assert again.headers["Location"].startswith(callback + "#error=access_denied")
    assert "error_code=otp_expired" in again.headers["Location"]


def test_a_magic_link_without_pkce_hands_the_session_in_the_fragment(auth: AuthStandIn) -> None:
    requests.post(
        f"{auth.url}/auth/v1/otp",
        json={"email": "implicit@example.com"},
        headers={"apikey": PUBLISHABLE_KEY},
        timeout=HANG_GUARD,
    ).raise_for_status()
    landed = requests.get(auth.links[-1], allow_redirects=False, timeout=HANG_GUARD).headers[
        "Location"
    ]
    site, _, fragment = landed.partition("#")
    assert site == auth.site_url
    handed = parse_qs(fragment)
    assert handed["token_type"] == ["bearer"]
    assert handed["type"] == ["magiclink"]
    assert claims(handed["access_token"][0], auth)["email"] == "implicit@example.com"


def test_an_expired_link_and_an_unlisted_redirect_are_refused(
    auth: AuthStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {"apikey": PUBLISHABLE_KEY}
    body = {"email": "late@example.com"}
    # Somewhere not the site nor on the allow list: the site instead, as GoTrue does.
    evil = "https://evil.example/steal"
    requests.post(
        f"{auth.url}/auth/v1/otp", json=body, params={"redirect_to": evil}, headers=headers,
        timeout=HANG_GUARD,
    ).raise_for_status()  # fmt: skip
    assert parse_qs(urlsplit(auth.links[-1]).query)["redirect_to"] == [auth.site_url]

    monkeypatch.setattr(auth, "otp_expiry", -1)
    requests.post(f"{auth.url}/auth/v1/otp", json=body, headers=headers, timeout=HANG_GUARD)
    late = requests.get(auth.links[-1], allow_redirects=False, timeout=HANG_GUARD).headers[
        "Location"
    ]
    assert "error_code=otp_expired" in late


def test_no_new_user_when_the_client_says_so(auth: AuthStandIn, db: Database) -> None:
    with pytest.raises(AuthApiError) as refused:
        client(auth).sign_in_with_otp(
            {"email": "stranger@example.com", "options": {"should_create_user": False}}
        )
    assert refused.value.code == "otp_disabled"
    assert db.fetch_all("select 1 from auth.users") == []


def test_a_user_made_by_the_cli_signs_in_by_link(auth: AuthStandIn, api: Api, db: Database) -> None:
    profile, _ = local_users.create(
        email="cli@example.com", name="Cli", db=db, settings=api.container.settings
    )
    requests.post(
        f"{auth.url}/auth/v1/otp",
        json={"email": "cli@example.com", "create_user": False},
        headers={"apikey": PUBLISHABLE_KEY},
        timeout=HANG_GUARD,
    ).raise_for_status()
    landed = requests.get(auth.links[-1], allow_redirects=False, timeout=HANG_GUARD).headers[
        "Location"
    ]
    token = parse_qs(landed.partition("#")[2])["access_token"][0]
    assert claims(token, auth)["sub"] == str(profile.id)


def test_user_and_logout(auth: AuthStandIn) -> None:
    browser = client(auth)
    session = browser.sign_up({"email": "out@example.com", "password": "long enough"}).session
    assert session is not None
    other = (
        client(auth)
        .sign_in_with_password({"email": "out@example.com", "password": "long enough"})
        .session
    )
    assert other is not None
    found = browser.get_user()
    assert found is not None
    assert found.user.email == "out@example.com"

    browser.sign_out()  # scope global: every session of the user ends
    user = requests.get(
        f"{auth.url}/auth/v1/user",
        headers={"apikey": PUBLISHABLE_KEY, "Authorization": f"Bearer {other.access_token}"},
        timeout=HANG_GUARD,
    )
    assert user.status_code == 403
    assert user.json()["error_code"] == "session_not_found"
    with pytest.raises(AuthApiError):
        client(auth).refresh_session(other.refresh_token)


def test_the_gateway_and_cors(auth: AuthStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"{auth.url}/auth/v1/token?grant_type=password"
    keyless = requests.post(url, json={}, timeout=HANG_GUARD)
    assert (keyless.status_code, keyless.json()) == (
        401,
        {"message": "No API key found in request"},
    )
    admin = requests.post(
        f"{auth.url}/auth/v1/admin/users",
        json={"email": "x@example.com"},
        headers={"apikey": PUBLISHABLE_KEY},
        timeout=HANG_GUARD,
    )
    assert admin.status_code == 401
    monkeypatch.setattr(auth, "publishable_keys", frozenset({PUBLISHABLE_KEY}))
    unknown = requests.post(
        url, json={}, headers={"apikey": "sb_publishable_other"}, timeout=HANG_GUARD
    )
    assert (unknown.status_code, unknown.json()) == (401, {"message": "Invalid API key"})
    assert (
        requests.post(url, json={}, headers={"apikey": SECRET_KEY}, timeout=HANG_GUARD).status_code
        == 400
    )

    frontend = "http://localhost:5173"
    monkeypatch.setattr(auth, "origins", frozenset({frontend}))
    asked = {
        "Origin": frontend,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "apikey, content-type, x-supabase-api-version",
    }
    preflight = requests.options(url, headers=asked, timeout=HANG_GUARD)
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == frontend
    assert "apikey" in preflight.headers["Access-Control-Allow-Headers"]
    stranger = requests.options(
        url, headers={**asked, "Origin": "https://evil.example"}, timeout=HANG_GUARD
    )
    assert "Access-Control-Allow-Origin" not in stranger.headers


def test_keys_and_sessions_survive_a_restart(
    tmp_path: Path, database_url: str, db: Database
) -> None:
    state = tmp_path / "auth.json"
    with running(database_url=database_url, state=state) as first:
        session = client(first).sign_up({"email": "kept@example.com", "password": "long enough"})
        assert session.session is not None
        kids = [
            k["kid"]
            for k in requests.get(
                f"{first.url}/auth/v1/.well-known/jwks.json", timeout=HANG_GUARD
            ).json()["keys"]
        ]
    with running(database_url=database_url, state=state) as second:
        again = requests.get(
            f"{second.url}/auth/v1/.well-known/jwks.json", timeout=HANG_GUARD
        ).json()
        assert [k["kid"] for k in again["keys"]] == kids
        refreshed = client(second).refresh_session(session.session.refresh_token).session
        assert refreshed is not None
        assert refreshed.user is not None
        assert refreshed.user.email == "kept@example.com"


def test_a_password_set_by_the_cli_signs_in_here(auth: AuthStandIn, api: Api, db: Database) -> None:
    settings = api.container.settings
    profile, _ = local_users.create(
        email="set@example.com", name=None, password="from the cli", db=db, settings=settings
    )
    session = (
        client(auth)
        .sign_in_with_password({"email": "set@example.com", "password": "from the cli"})
        .session
    )
    assert session is not None
    assert claims(session.access_token, auth)["sub"] == str(profile.id)
    with pytest.raises(ServiceError, match="at least 6 characters"):
        local_users.create(
            email="set@example.com", name=None, password="short", db=db, settings=settings
        )


def test_only_local_settings_without_a_project_get_the_stand_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, stand_in = with_auth_stand_in(Settings(port=8123))
    assert stand_in is not None
    assert str(local.supabase_url).rstrip("/") == "http://localhost:8123"
    assert stand_in.url == "http://localhost:8123"
    assert local.auth_issuer == "http://localhost:8123/auth/v1"
    # A project configured: its own Auth, untouched.
    project = Settings(supabase_url="https://proj.supabase.co")  # type: ignore[arg-type]
    assert with_auth_stand_in(project) == (project, None)
    # Production without its Supabase settings still refuses to start, naming them.
    for name, value in PRODUCTION.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SUPABASE_URL")
    with pytest.raises(SettingsError, match="missing: SUPABASE_URL"):
        Settings()


def test_redirects_follow_gotrues_rule(auth: AuthStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "site_url", "https://app.example.com/")
    monkeypatch.setattr(auth, "allow_list", ("https://api.example.com/api/auth/callback*",))
    kept = [
        "https://app.example.com/dashboard?x=1",
        "https://api.example.com/api/auth/callback",
        "https://api.example.com/api/auth/callback?next=1",
    ]
    replaced = [
        "http://app.example.com/dashboard",  # another scheme
        "https://app.example.com:8443/",  # another port, not loopback
        "https://api.example.com/api/other",
        "https://app.example.com.evil.example/",
        " https://app.example.com/",  # a leading space browsers strip
    ]
    assert [landing(auth, url) for url in kept] == kept
    assert {landing(auth, url) for url in replaced} == {"https://app.example.com/"}
    monkeypatch.setattr(auth, "site_url", "http://localhost:8080")
    assert landing(auth, "http://localhost:5173/signin") == "http://localhost:5173/signin"


def landing(auth: AuthStandIn, wanted: str) -> str:
    """Where the magic link asked with `redirect_to=wanted` lands."""
    requests.post(
        f"{auth.url}/auth/v1/otp",
        json={"email": "where@example.com"},
        params={"redirect_to": wanted},
        headers={"apikey": PUBLISHABLE_KEY},
        timeout=HANG_GUARD,
    ).raise_for_status()
    [landed] = parse_qs(urlsplit(auth.links[-1]).query)["redirect_to"]
    return landed


# Multi-factor authentication, as supabase-js's `auth.mfa` (here supabase-py's) calls it.


def signed_up(auth: AuthStandIn, address: str) -> SyncGoTrueClient:
    browser = client(auth)
    browser.sign_up({"email": address, "password": "correct horse"})
    return browser


def test_a_totp_factor_enrolled_and_verified_raises_the_session_to_aal2(
    auth: AuthStandIn, api: Api
) -> None:
    browser = signed_up(auth, "mfa@example.com")
    first = browser.get_session()
    assert first is not None
    assert claims(first.access_token, auth)["aal"] == "aal1"

    enrolled = browser.mfa.enroll({"factor_type": "totp", "friendly_name": "Phone"})

    assert enrolled.type == "totp"
    assert enrolled.totp is not None
    assert enrolled.totp.uri.startswith("otpauth://totp/")
    assert f"secret={enrolled.totp.secret}" in enrolled.totp.uri
    assert enrolled.totp.qr_code.startswith(
        'data:image/svg+xml;utf-8,<svg xmlns="http://www.w3.org/2000/svg"'
    )
    [listed] = browser.mfa.list_factors().all
    assert (listed.id, listed.status) == (enrolled.id, "unverified")
    challenge = browser.mfa.challenge({"factor_id": enrolled.id})
    code = pyotp.TOTP(enrolled.totp.secret).now()

    browser.mfa.verify({"factor_id": enrolled.id, "challenge_id": challenge.id, "code": code})

    session = browser.get_session()
    assert session is not None
    raised = claims(session.access_token, auth)
    assert raised["aal"] == "aal2"
    assert raised["session_id"] == claims(first.access_token, auth)["session_id"]
    assert [m["method"] for m in raised["amr"]] == ["totp", "password"]
    assert raised["has_access"] is False  # the access hook still ran
    level = browser.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal2", "aal2")
    [verified] = browser.mfa.list_factors().totp
    assert verified.id == enrolled.id
    # The API reads the second factor from the token, and a refresh keeps it.
    assert api.container.tokens.verify(session.access_token).aal == "aal2"
    refreshed = browser.refresh_session()
    assert refreshed.session is not None
    assert claims(refreshed.session.access_token, auth)["aal"] == "aal2"


def test_a_wrong_or_replayed_code_and_someone_elses_factor_are_refused(
    auth: AuthStandIn,
) -> None:
    browser = signed_up(auth, "careful@example.com")
    enrolled = browser.mfa.enroll({"factor_type": "totp"})
    assert enrolled.totp is not None
    totp = pyotp.TOTP(enrolled.totp.secret)
    challenge = browser.mfa.challenge({"factor_id": enrolled.id})
    wrong = f"{(int(totp.now()) + 500_000) % 1_000_000:06d}"

    with pytest.raises(AuthApiError) as refused:
        browser.mfa.verify({"factor_id": enrolled.id, "challenge_id": challenge.id, "code": wrong})
    assert (refused.value.status, refused.value.code) == (422, "mfa_verification_failed")
    session = browser.get_session()
    assert session is not None
    assert claims(session.access_token, auth)["aal"] == "aal1"

    good = {"factor_id": enrolled.id, "challenge_id": challenge.id, "code": totp.now()}
    browser.mfa.verify(good)  # type: ignore[arg-type]
    # A challenge answers once: the same code again is refused.
    with pytest.raises(AuthApiError) as replayed:
        browser.mfa.verify(good)  # type: ignore[arg-type]
    assert replayed.value.status == 422

    stranger = signed_up(auth, "stranger@example.com")
    for call in (
        lambda: stranger.mfa.challenge({"factor_id": enrolled.id}),
        lambda: stranger.mfa.unenroll({"factor_id": enrolled.id}),
    ):
        with pytest.raises(AuthApiError) as hidden:
            call()
        assert (hidden.value.status, hidden.value.code) == (404, "mfa_factor_not_found")
    with pytest.raises(AuthApiError) as other_type:
        stranger.mfa.enroll({"factor_type": "phone", "phone": "+15555550100"})
    assert other_type.value.status == 422


def test_a_verified_factor_needs_aal2_to_remove_and_its_removal_lowers_the_session(
    auth: AuthStandIn,
) -> None:
    browser = signed_up(auth, "remove@example.com")
    enrolled = browser.mfa.enroll({"factor_type": "totp"})
    assert enrolled.totp is not None
    secret = enrolled.totp.secret
    browser.mfa.challenge_and_verify({"factor_id": enrolled.id, "code": pyotp.TOTP(secret).now()})
    # A new sign-in with the password alone is aal1: it may neither remove nor add a factor.
    other = client(auth)
    other.sign_in_with_password({"email": "remove@example.com", "password": "correct horse"})
    level = other.mfa.get_authenticator_assurance_level()
    assert (level.current_level, level.next_level) == ("aal1", "aal2")
    with pytest.raises(AuthApiError) as refused:
        other.mfa.unenroll({"factor_id": enrolled.id})
    assert (refused.value.status, refused.value.code) == (422, "insufficient_aal")
    with pytest.raises(AuthApiError) as no_new:
        other.mfa.enroll({"factor_type": "totp", "friendly_name": "Second"})
    assert (no_new.value.status, no_new.value.code) == (403, "insufficient_aal")

    assert browser.mfa.unenroll({"factor_id": enrolled.id}).id == enrolled.id

    assert browser.mfa.list_factors().all == []
    refreshed = browser.refresh_session()
    assert refreshed.session is not None
    assert claims(refreshed.session.access_token, auth)["aal"] == "aal1"


def test_verifying_ends_the_users_other_sessions_below_aal2(auth: AuthStandIn) -> None:
    browser = signed_up(auth, "ends@example.com")
    other = client(auth)
    other.sign_in_with_password({"email": "ends@example.com", "password": "correct horse"})
    enrolled = browser.mfa.enroll({"factor_type": "totp"})
    assert enrolled.totp is not None

    browser.mfa.challenge_and_verify(
        {"factor_id": enrolled.id, "code": pyotp.TOTP(enrolled.totp.secret).now()}
    )

    stale = other.get_session()
    assert stale is not None
    with pytest.raises(AuthApiError) as ended:
        other.refresh_session(stale.refresh_token)
    assert ended.value.status == 400


def test_factors_survive_a_restart(tmp_path: Path, database_url: str, db: Database) -> None:
    state = tmp_path / "auth.json"
    with running(database_url=database_url, state=state) as first:
        browser = signed_up(first, "kept-factor@example.com")
        enrolled = browser.mfa.enroll({"factor_type": "totp"})
        assert enrolled.totp is not None
        session = browser.get_session()
        assert session is not None
    with running(database_url=database_url, state=state) as again:
        later = client(again)
        later.refresh_session(session.refresh_token)
        later.mfa.challenge_and_verify(
            {"factor_id": enrolled.id, "code": pyotp.TOTP(enrolled.totp.secret).now()}
        )
        raised = later.get_session()
        assert raised is not None
        assert claims(raised.access_token, again)["aal"] == "aal2"
