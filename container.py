"""Builds each adapter once, on first use, from the settings: nothing dials out at import."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from adapters import local_postgres
from adapters.accounts import Accounts, LocalAccounts, SupabaseAccounts
from adapters.bus import EventBus, InlineBus
from adapters.github_api import GitHubGateway
from adapters.mail import Mailer, build_mailer
from adapters.postgres import Database
from adapters.stripe_api import StripeGateway
from adapters.supabase_auth import SupabaseAuth
from adapters.tokens import TokenVerifier
from config import Settings, secret
from core.emails import Brand

if TYPE_CHECKING:
    from subscribers.access import AccessSubscriber
    from subscribers.emails import EmailSubscriber

T = TypeVar("T")


class once(Generic[T]):
    """A cached property built exactly once even when request threads race for it.

    functools.cached_property stopped locking in Python 3.12: two threads could each build a
    connection pool or a publisher, and one would leak.
    """

    def __init__(self, build: Callable[[Any], T]) -> None:
        self._build = build
        self._name = build.__name__
        self._lock = threading.Lock()

    @overload
    def __get__(self, instance: None, owner: type) -> once[T]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> T: ...
    def __get__(self, instance: object | None, owner: type) -> once[T] | T:
        if instance is None:
            return self
        values = instance.__dict__
        if self._name not in values:
            with self._lock:
                if self._name not in values:
                    values[self._name] = self._build(instance)
        value: T = values[self._name]
        return value


def brand_for(settings: Settings, *, default_site: str) -> Brand:
    """Who the e-mails speak for: the admin sender's display name, the site, the support inbox."""
    name = settings.email_from_admin.partition("<")[0].strip().strip('"')
    product = name.removesuffix(" Team").strip() or "Acme"
    site = str(settings.site_url) if settings.site_url else default_site
    return Brand(product_name=product, site_url=site, support_email=settings.support_email)


class Container:
    """The service's collaborators, shared by the API and the subscriber targets."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._embedded: Any = None

    def database_url(self) -> str:
        """DATABASE_URL, or the embedded server under `.data/` (never in production)."""
        if self.settings.database_url is not None:
            return self.settings.database_url.get_secret_value()
        if self.settings.is_production:
            raise RuntimeError("DATABASE_URL is required in production")
        with self._lock:
            if self._embedded is None:
                self._embedded = local_postgres.start(self.settings.data_dir.resolve() / "postgres")
            return local_postgres.url(self._embedded)

    @once
    def db(self) -> Database:
        return Database(self.database_url)

    @once
    def stripe(self) -> StripeGateway:
        s = self.settings
        return StripeGateway(
            api_key=secret(s.stripe_secret_key),
            api_base=str(s.stripe_api_base) if s.stripe_api_base else None,
            api_version=s.stripe_api_version,
        )

    @once
    def supabase_auth(self) -> SupabaseAuth:
        s = self.settings
        return SupabaseAuth(
            url=str(s.supabase_url) if s.supabase_url else None,
            anon_key=secret(s.supabase_anon_key),
        )

    @once
    def tokens(self) -> TokenVerifier:
        s = self.settings
        return TokenVerifier(
            jwt_secret=secret(s.supabase_jwt_secret),
            supabase_url=str(s.supabase_url) if s.supabase_url else None,
        )

    @once
    def access_subscriber(self) -> AccessSubscriber:
        from subscribers.access import AccessSubscriber

        return AccessSubscriber(db=self.db, stripe=self.stripe, accounts=self.accounts)

    @once
    def accounts(self) -> Accounts:
        s = self.settings
        if s.supabase_url and s.supabase_service_role_key:
            origin = s.site_origin
            return SupabaseAccounts(
                url=str(s.supabase_url),
                service_role_key=s.supabase_service_role_key.get_secret_value(),
                redirect_to=origin + s.auth_callback_url if origin else None,
            )
        if s.is_production:
            raise RuntimeError("SUPABASE_SERVICE_ROLE_KEY is required in production")
        return LocalAccounts(self.db)

    @once
    def github(self) -> GitHubGateway:
        s = self.settings
        return GitHubGateway(token=secret(s.github_token), api_url=str(s.github_api_url))

    @once
    def mailer(self) -> Mailer:
        return build_mailer(self.settings)

    @once
    def brand(self) -> Brand:
        return brand_for(self.settings, default_site=f"http://localhost:{self.settings.port}")

    @once
    def email_subscriber(self) -> EmailSubscriber:
        from subscribers.emails import EmailSubscriber

        return EmailSubscriber(
            db=self.db,
            mailer=self.mailer,
            brand=self.brand,
            sender=self.settings.email_from_admin,
            reply_to=self.settings.support_email,
        )

    @once
    def bus(self) -> EventBus:
        if self.settings.event_bus == "pubsub":
            # Imported here: gRPC and the Pub/Sub client load only in processes that publish.
            from adapters.pubsub import PubSubBus

            return PubSubBus.from_settings(self.settings)
        return InlineBus({"access": self.access_subscriber, "emails": self.email_subscriber})

    def close(self) -> None:
        """Flush the bus and close the pool (on SIGTERM, at worker exit)."""
        if "bus" in self.__dict__:
            self.bus.close()
        if "db" in self.__dict__:
            self.db.close()
