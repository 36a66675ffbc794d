"""Local users for development: an account in the `auth.users` stand-in, and what it holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.db import profiles
from adapters.db.pool import Database
from adapters.db.profiles import Profile
from adapters.tokens import access_claims, sign_claims
from config import Settings
from core.addresses import email_address
from core.errors import Forbidden, InvalidRequest, NotConfigured


@dataclass(frozen=True)
class UserSummary:
    """A profile with its purchases and the e-mails sent to its address."""

    profile: Profile
    purchases: list[dict[str, Any]]
    emails: list[dict[str, Any]]


def ensure_local(settings: Settings) -> None:
    """Refuse in production: accounts there belong to Supabase Auth alone."""
    if settings.is_production:
        raise Forbidden("local users are for development: refused with APP_ENV=production")


def create(
    *, email: str, name: str | None, db: Database, settings: Settings, password: str | None = None
) -> tuple[Profile, bool]:
    """The profile for `email`, created (with its auth user) when missing; True if new. A
    `password` is set (or replaced) for signing in through the Auth stand-in. Made by hand, a
    new one is taken as welcomed: its first sign-in sends no welcome mail (a person who signs
    up on the pages is welcomed, accounts/welcome_rules.py)."""
    ensure_local(settings)
    # Here, not at import: the app registers this module's commands, and the stand-in loads jwt.
    from dev import auth_stand_in

    address = _address(email)
    if password is not None and len(password) < auth_stand_in.MIN_PASSWORD:
        raise InvalidRequest(
            f"password: at least {auth_stand_in.MIN_PASSWORD} characters, as Supabase Auth asks"
        )
    with db.transaction() as conn:
        row = conn.execute(
            "insert into auth.users (id, email, raw_user_meta_data)"
            " values (gen_random_uuid(), %s, jsonb_build_object('full_name', %s::text))"
            " on conflict ((lower(email))) do nothing returning id",
            (address, name),
        ).fetchone()
        if row is not None:
            conn.execute(
                "update public.profiles set welcomed_at = now() where id = %s", (row["id"],)
            )
        if password is not None:
            auth_stand_in.ensure_passwords(conn)
            conn.execute(
                "update auth.users set encrypted_password = %s,"
                " email_confirmed_at = coalesce(email_confirmed_at, now())"
                " where lower(email) = lower(%s)",
                (auth_stand_in.hash_password(password), address),
            )
    found = profiles.by_email(db, address)
    if found is None:
        raise NotConfigured("no profile was created: are the migrations applied?")
    return found, row is not None


def token(
    *, email: str, ttl: int, db: Database, settings: Settings, second_factor: bool = False
) -> str:
    """An access token for the user with `email`, accepted by this API in development; with
    `second_factor`, as Supabase Auth writes it once the session passed MFA (`aal2`, what the
    support API asks of an admin)."""
    ensure_local(settings)
    secret = settings.jwt_secret
    if secret is None:
        raise NotConfigured(
            "tokens of this Supabase project come from Supabase Auth (JWKS):"
            " set SUPABASE_JWT_SECRET to sign local ones, or sign in through the frontend"
        )
    profile = _existing(db, email)
    supabase_url = str(settings.supabase_url) if settings.supabase_url else None
    claims = access_claims(
        user_id=profile.id, email=profile.email or email, supabase_url=supabase_url, ttl=ttl
    )
    if second_factor:
        claims["aal"] = "aal2"
        claims["amr"] = [*claims["amr"], {"method": "totp", "timestamp": claims["iat"]}]
    return sign_claims(_hooked(db, claims), secret)


def make_admin(*, email: str, db: Database, settings: Settings) -> Profile:
    """Make the user with `email` an admin (`profiles.is_admin`), as a founder does in SQL."""
    ensure_local(settings)
    profile = _existing(db, email)
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = true where id = %s", (profile.id,))
    return profile


def _hooked(db: Database, claims: dict[str, Any]) -> dict[str, Any]:
    """The claims as the Custom Access Token Hook leaves them, called as Supabase Auth calls it
    (as the Auth stand-in does), so local tokens carry the same claims."""
    from dev import auth_stand_in

    with db.transaction() as conn:
        try:
            return auth_stand_in.hook_claims(conn, claims, "password")
        except RuntimeError as exc:
            raise NotConfigured(str(exc)) from exc


def user_id(*, email: str, db: Database, settings: Settings) -> str:
    """The id of the user with `email`: what a checkout signed in as them names."""
    ensure_local(settings)
    return str(_existing(db, email).id)


def summary(*, email: str, db: Database, settings: Settings) -> UserSummary:
    """Profile, purchases and e-mails sent, for `users show`."""
    ensure_local(settings)
    profile = _existing(db, email)
    purchases = db.fetch_all(
        "select p.stripe_checkout_session_id as session, pr.name as product, p.amount_total,"
        " p.currency, p.created_at from public.purchases p"
        " left join public.products pr on pr.id = p.product_id"
        " where p.user_id = %s::uuid order by p.created_at",
        (profile.id,),
    )
    emails = db.fetch_all(
        "select kind, event_id, provider_id, sent_at from public.sent_emails"
        " where lower(recipient) = lower(%s) order by sent_at",
        (profile.email or email,),
    )
    return UserSummary(profile=profile, purchases=purchases, emails=emails)


def _existing(db: Database, email: str) -> Profile:
    found = profiles.by_email(db, _address(email))
    if found is None:
        raise InvalidRequest(f"no user with e-mail {email}: create it with `users create`")
    return found


def _address(email: str) -> str:
    try:
        return email_address(email)
    except ValueError as exc:
        raise InvalidRequest(f"not an e-mail address: {email}") from exc
