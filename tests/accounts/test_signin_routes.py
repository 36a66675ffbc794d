"""GET /api/auth/callback: PKCE exchange at Supabase Auth, @supabase/ssr cookies, safe redirect."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from adapters.supabase_auth import (
    decode_value,
    encode_value,
    read_session,
    session_cookies,
    storage_key,
)
from config import SettingsError
from dev.auth_stand_in import AuthStandIn
from tests.conftest import Api
from tests.fakes.supabase import PUBLISHABLE_KEY
from tests.helpers import HANG_GUARD, create_user

USER = "7b0e1f5e-2f44-4a53-9a3c-0d3f1f0b6d01"


def cookie_name(supabase: AuthStandIn) -> str:
    return storage_key(supabase.url)


def test_without_code_redirects_to_the_callback_path(api: Api) -> None:
    response = api.get("/api/auth/callback")
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard"
    assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},
        {"X-Forwarded-Proto": "javascript"},
        {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "javascript"},
    ],
)
def test_headers_cannot_redirect_elsewhere(api: Api, headers: dict[str, str]) -> None:
    # Without SITE_URL the callback once built its target from the Host header.
    response = api.get("/api/auth/callback", headers=headers)
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard"


def test_production_refuses_to_start_without_site_url(
    production_api: Callable[..., Api],
) -> None:
    with pytest.raises(SettingsError, match="missing: SITE_URL"):
        production_api(site_url=None)


def test_code_exchange_sets_the_session_cookie(api: Api, fakes: Any) -> None:
    supabase: AuthStandIn = fakes[1]
    code = supabase.issue_code(verifier="verifier-123", user_id=USER, email="ada@example.com")
    key = cookie_name(supabase)
    response = api.get(
        f"/api/auth/callback?code={code}",
        cookies={f"{key}-code-verifier": encode_value("verifier-123")},
    )
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard"
    jar = {c.name: c.value or "" for c in response.cookies}
    session = read_session(key, jar)
    assert session is not None
    assert session["user"]["id"] == USER
    assert session["access_token"]
    assert session["refresh_token"]
    assert jar[key].startswith("base64-")
    # The verifier is spent: its cookie is cleared.
    cleared = [
        h
        for h in response.raw.headers.getlist("Set-Cookie")
        if h.startswith(f"{key}-code-verifier=")
    ]
    assert cleared
    assert "Max-Age=0" in cleared[0]
    [call] = supabase.calls("POST", "/auth/v1/token")
    assert call.query == [("grant_type", "pkce")]
    assert call.json() == {"auth_code": code, "code_verifier": "verifier-123"}
    assert call.headers["Apikey"] == "anon-key"


def test_password_recovery_verifier_is_read_too(api: Api, fakes: Any) -> None:
    supabase: AuthStandIn = fakes[1]
    code = supabase.issue_code(verifier="v-456", user_id=USER, email="ada@example.com")
    key = cookie_name(supabase)
    response = api.get(
        f"/api/auth/callback?code={code}",
        cookies={f"{key}-code-verifier": encode_value("v-456/PASSWORD_RECOVERY")},
    )
    assert read_session(key, {c.name: c.value or "" for c in response.cookies}) is not None


def test_failed_exchange_still_redirects_without_cookies(api: Api, fakes: Any) -> None:
    supabase: AuthStandIn = fakes[1]
    code = supabase.issue_code(verifier="right", user_id=USER, email="ada@example.com")
    key = cookie_name(supabase)
    response = api.get(
        f"/api/auth/callback?code={code}", cookies={f"{key}-code-verifier": encode_value("wrong")}
    )
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard"
    assert not [c for c in response.cookies if c.name.startswith(key) and c.value]


def test_redirect_goes_to_site_url_and_configured_path(api_factory: Any) -> None:
    api = api_factory(site_url="https://app.example.com/some/page", auth_callback_url="/welcome")
    response = api.get("/api/auth/callback?next=https://evil.example.net")
    assert response.headers["Location"] == "https://app.example.com/welcome"


def test_long_sessions_are_chunked_like_supabase_ssr() -> None:
    session = {"access_token": "x" * 4000, "user": {"id": USER}}
    cookies = session_cookies("sb-proj-auth-token", session)
    assert [c.name for c in cookies] == ["sb-proj-auth-token.0", "sb-proj-auth-token.1"]
    assert all(len(c.value) <= 3180 for c in cookies)
    assert read_session("sb-proj-auth-token", {c.name: c.value for c in cookies}) == session
    assert decode_value(encode_value("v/PASSWORD_RECOVERY")) == "v/PASSWORD_RECOVERY"


def test_storage_key_follows_supabase_js() -> None:
    assert storage_key("https://abcdefgh.supabase.co") == "sb-abcdefgh-auth-token"


def sign_in(api: Api, supabase: AuthStandIn, *, created_at: str) -> None:
    code = supabase.issue_code(
        verifier="v", user_id=USER, email="new@example.com", created_at=created_at, name="Grace"
    )
    key = cookie_name(supabase)
    response = api.get(
        f"/api/auth/callback?code={code}", cookies={f"{key}-code-verifier": encode_value("v")}
    )
    assert response.status_code == 302


def welcome_mails(api: Api) -> list[str]:
    folder = Path(api.container.settings.email_outbox_dir)
    return [p.read_text() for p in folder.glob("*.eml")] if folder.exists() else []


def test_a_new_account_gets_one_welcome_mail(api: Api, fakes: Any, db: Database) -> None:
    now = datetime.now(UTC).isoformat()
    sign_in(api, fakes[1], created_at=now)
    sign_in(api, fakes[1], created_at=now)
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [mail] = welcome_mails(api)
    assert "To: new@example.com" in mail
    assert "Welcome" in mail
    assert db.fetch_all("select event_id, kind from public.sent_emails") == [
        {"event_id": f"signup_{USER}", "kind": "new-signup"}
    ]


def test_an_old_account_signing_in_gets_no_welcome_mail(api: Api, fakes: Any) -> None:
    sign_in(api, fakes[1], created_at="2025-01-01T00:00:00Z")
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert welcome_mails(api) == []


# A password sign-up never passes the callback: its first GET /api/me welcomes it.


def password_sign_up(supabase: AuthStandIn, address: str) -> dict[str, Any]:
    answer = requests.post(
        f"{supabase.url}/auth/v1/signup",
        json={"email": address, "password": "correct horse"},
        headers={"apikey": PUBLISHABLE_KEY},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    session: dict[str, Any] = answer.json()
    return session


def me(api: Api, token: str) -> Any:
    return api.get("/api/me", headers={"Authorization": f"Bearer {token}"})


def test_a_password_sign_up_gets_one_welcome_mail_from_its_first_call(
    api: Api, fakes: Any, db: Database
) -> None:
    session = password_sign_up(fakes[1], "pw-new@example.com")
    assert api.container.bus.wait_idle()  # type: ignore[attr-defined]
    assert welcome_mails(api) == []  # signed up: nothing told yet

    for _ in range(3):
        assert me(api, session["access_token"]).status_code == 200

    assert api.container.bus.wait_idle()  # type: ignore[attr-defined]
    [mail] = welcome_mails(api)
    assert "To: pw-new@example.com" in mail
    assert "Welcome" in mail
    user = session["user"]["id"]
    assert db.fetch_all("select event_id, kind from public.sent_emails") == [
        {"event_id": f"signup_{user}", "kind": "new-signup"}
    ]
    [row] = db.fetch_all("select welcomed_at from public.profiles where id = %s", (user,))
    assert row["welcomed_at"] is not None


def test_a_link_sign_in_then_the_dashboard_is_still_one_welcome(
    api: Api, fakes: Any, db: Database
) -> None:
    user = create_user(db, "linked@example.com")
    now = datetime.now(UTC).isoformat()
    code = fakes[1].issue_code(
        verifier="v", user_id=user, email="linked@example.com", created_at=now
    )
    key = cookie_name(fakes[1])
    answer = api.get(
        f"/api/auth/callback?code={code}", cookies={f"{key}-code-verifier": encode_value("v")}
    )
    assert answer.status_code == 302
    token = api.token(sub=user, email="linked@example.com")

    assert me(api, token).status_code == 200
    assert me(api, token).status_code == 200

    assert api.container.bus.wait_idle()  # type: ignore[attr-defined]
    assert len(welcome_mails(api)) == 1


def test_someone_there_before_gets_no_welcome_from_the_dashboard(api: Api, db: Database) -> None:
    user = create_user(db, "old@example.com")
    with db.transaction() as conn:
        conn.execute(
            "update public.profiles set created_at = now() - interval '30 days' where id = %s",
            (user,),
        )
    assert me(api, api.token(sub=user, email="old@example.com")).status_code == 200
    assert api.container.bus.wait_idle()  # type: ignore[attr-defined]
    assert welcome_mails(api) == []


def test_a_welcome_the_bus_refused_goes_on_the_next_call(
    api_factory: Callable[..., Api], fakes: Any, db: Database
) -> None:
    down = api_factory()
    session = password_sign_up(fakes[1], "pw-later@example.com")
    down.container.bus.close()  # publishing now fails

    assert me(down, session["access_token"]).status_code == 200  # the answer does not wait on it

    user = session["user"]["id"]
    [row] = db.fetch_all("select welcomed_at from public.profiles where id = %s", (user,))
    assert row["welcomed_at"] is None  # not recorded: still due
    up = api_factory()
    assert me(up, session["access_token"]).status_code == 200
    assert up.container.bus.wait_idle()  # type: ignore[attr-defined]
    [mail] = welcome_mails(up)
    assert "To: pw-later@example.com" in mail
