"""Accounts for buyers who checked out as guests, through Supabase Auth's admin API.

Supabase's own mailer (without custom SMTP) reaches only the project's team, a few mails an
hour: the account is created confirmed and without any mail from Supabase, and the sign-in link
comes from `generate_link` and travels in our own e-mail, through Resend.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from adapters.db.pool import Database

# Supabase Auth's SDK (costly to import: bench/coldstart.py) is loaded by the first call that needs
# it, not by every subscriber's start-up: most events make no account.
if TYPE_CHECKING:
    from supabase_auth import SyncGoTrueAdminAPI

log = logging.getLogger(__name__)


class AccountError(RuntimeError):
    """The account or its link could not be made; the event is retried."""


class Accounts(Protocol):
    def ensure(self, *, email: str, name: str | None) -> None:
        """Make sure a user with this e-mail exists (its profile follows by trigger)."""

    def sign_in_link(self, *, email: str) -> str:
        """A one-time link that signs the user in and lands on the site's callback page."""

    @property
    def link_lifetime(self) -> int | None:
        """Seconds a link from `sign_in_link` works (None: it does not expire)."""

    def delete(self, *, user_id: str) -> bool:
        """Delete the auth user (their profile and own account follow by cascade); False when
        there was none (deleted already)."""


class ExistingAccounts:
    """For a process that holds no service-role key (the api, with the Pub/Sub design): an
    account that exists already is found; a new one is left to the access target, which makes
    it (and the e-mail target its sign-in link)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def ensure(self, *, email: str, name: str | None) -> None:
        rows = self._db.fetch_all(
            "select 1 from public.profiles where lower(email) = lower(%s)", (email,)
        )
        if not rows:
            raise AccountError(f"no account for {email} yet: the access target makes it")

    def sign_in_link(self, *, email: str) -> str:
        raise AccountError("this service makes no sign-in links: the e-mail target does")

    @property
    def link_lifetime(self) -> int | None:
        return None

    def delete(self, *, user_id: str) -> bool:
        raise AccountError("this service deletes no auth users: it holds no secret key")


class SupabaseAccounts:
    """Creates users and their magic links with the service-role key; Supabase sends nothing."""

    def __init__(
        self,
        *,
        url: str,
        service_role_key: str,
        redirect_to: str | None,
        timeout: float,
        link_lifetime: int,
    ) -> None:
        self._timeout = timeout
        # Supabase Auth's "Email OTP Expiration": its API does not say it, the settings do.
        self.link_lifetime: int | None = link_lifetime
        self._url = url.rstrip("/") + "/auth/v1"
        self._key = service_role_key
        self._redirect_to = redirect_to

    @contextmanager
    def _admin(self) -> Iterator[SyncGoTrueAdminAPI]:
        """The admin API over a client with a deadline; an outage becomes AccountError."""
        import httpx
        from supabase_auth import SyncGoTrueAdminAPI
        from supabase_auth.errors import AuthApiError, AuthError

        http = httpx.Client(timeout=self._timeout)
        headers = {"apikey": self._key, "Authorization": f"Bearer {self._key}"}
        try:
            yield SyncGoTrueAdminAPI(url=self._url, headers=headers, http_client=http)
        except AuthApiError:
            raise  # Supabase answered: the caller decides what its refusal means
        except (AuthError, httpx.HTTPError) as exc:  # AuthRetryableError: timed out, unreachable
            raise AccountError(f"Supabase Auth unreachable: {type(exc).__name__}") from exc
        finally:
            http.close()

    def ensure(self, *, email: str, name: str | None) -> None:
        from supabase_auth.errors import AuthApiError

        attributes: dict[str, Any] = {
            "email": email,
            "email_confirm": True,  # paying with this address is proof enough; no mail asks
            "user_metadata": {"full_name": name} if name else {},
        }
        try:
            with self._admin() as admin:
                admin.create_user(attributes)  # type: ignore[arg-type]
        except AuthApiError as exc:
            if exc.code == "email_exists" or exc.status == 422:
                return  # created meanwhile (another delivery, or the buyer signed up)
            raise AccountError(f"Supabase refused to create a buyer: {exc.message}") from exc
        log.info("created an account for a guest buyer")

    def sign_in_link(self, *, email: str) -> str:
        from supabase_auth.errors import AuthApiError
        from supabase_auth.types import GenerateInviteOrMagiclinkParams

        params: GenerateInviteOrMagiclinkParams = {"type": "magiclink", "email": email}
        if self._redirect_to:
            params["options"] = {"redirect_to": self._redirect_to}
        try:
            with self._admin() as admin:
                link = admin.generate_link(params)
        except AuthApiError as exc:
            raise AccountError(f"Supabase refused a sign-in link: {exc.message}") from exc
        return link.properties.action_link

    def delete(self, *, user_id: str) -> bool:
        """Supabase Auth's admin API, `DELETE /auth/v1/admin/users/{id}`, not soft: the user
        and, by the cascade from auth.users, their profile go for good."""
        from supabase_auth.errors import AuthApiError

        try:
            with self._admin() as admin:
                admin.delete_user(user_id, should_soft_delete=False)
        except AuthApiError as exc:
            if exc.status == 404 or exc.code == "user_not_found":
                return False
            raise AccountError(f"Supabase refused to delete a user: {exc.message}") from exc
        log.info("deleted an auth user")
        return True


class LocalAccounts:
    """Outside production without a service-role key: a row in the local `auth.users` stand-in."""

    def __init__(self, db: Database, *, signin_url: str) -> None:
        self._db = db
        self._signin_url = signin_url

    def ensure(self, *, email: str, name: str | None) -> None:
        meta = json.dumps({"full_name": name} if name else {})
        with self._db.transaction() as conn:
            conn.execute(
                "insert into auth.users (id, email, raw_user_meta_data)"
                " values (gen_random_uuid(), %s, %s::jsonb)"
                " on conflict ((lower(email))) do nothing",
                (email, meta),
            )

    def sign_in_link(self, *, email: str) -> str:
        # No auth server runs locally: the site's sign-in page (`users token` makes a session).
        return self._signin_url

    @property
    def link_lifetime(self) -> int | None:
        return None  # the sign-in page does not expire

    def delete(self, *, user_id: str) -> bool:
        with self._db.transaction() as conn:
            gone = conn.execute(
                "delete from auth.users where id = %s returning id", (user_id,)
            ).fetchone()
        return gone is not None
