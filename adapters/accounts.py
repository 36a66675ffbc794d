"""Accounts for buyers who checked out as guests: invited through Supabase Auth's admin API."""

from __future__ import annotations

import json
import logging
from typing import Protocol

import httpx
from supabase_auth import SyncGoTrueAdminAPI
from supabase_auth.errors import AuthApiError, AuthError

from adapters.db.pool import Database

log = logging.getLogger(__name__)


class AccountError(RuntimeError):
    """The account could not be created; the event is retried."""


class Accounts(Protocol):
    def invite(self, *, email: str, name: str | None) -> None:
        """Make sure a user with this e-mail exists (its profile follows by trigger)."""


class SupabaseAccounts:
    """Invites by e-mail: Supabase creates the user and mails the sign-in link."""

    def __init__(
        self, *, url: str, service_role_key: str, redirect_to: str | None, timeout: float
    ) -> None:
        self._timeout = timeout
        self._url = url.rstrip("/") + "/auth/v1"
        self._key = service_role_key
        self._redirect_to = redirect_to

    def invite(self, *, email: str, name: str | None) -> None:
        http = httpx.Client(timeout=self._timeout)
        admin = SyncGoTrueAdminAPI(
            url=self._url,
            headers={"apikey": self._key, "Authorization": f"Bearer {self._key}"},
            http_client=http,
        )
        options = {"data": {"full_name": name} if name else {}, "redirect_to": self._redirect_to}
        try:
            admin.invite_user_by_email(email, options)  # type: ignore[arg-type]
        except AuthApiError as exc:
            if exc.code == "email_exists" or exc.status == 422:
                return  # created meanwhile (another delivery, or the buyer signed up)
            raise AccountError(f"Supabase refused to invite a buyer: {exc.message}") from exc
        except (AuthError, httpx.HTTPError) as exc:  # AuthRetryableError: timed out, unreachable
            raise AccountError(f"Supabase Auth unreachable: {type(exc).__name__}") from exc
        finally:
            http.close()
        log.info("invited a guest buyer to create their account")


class LocalAccounts:
    """Outside production without a service-role key: a row in the local `auth.users` stand-in."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def invite(self, *, email: str, name: str | None) -> None:
        meta = json.dumps({"full_name": name} if name else {})
        with self._db.transaction() as conn:
            conn.execute(
                "insert into auth.users (id, email, raw_user_meta_data)"
                " values (gen_random_uuid(), %s, %s::jsonb)"
                " on conflict ((lower(email))) do nothing",
                (email, meta),
            )
