"""What handlers receive from the composition root."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from flask import current_app, g, request

from accounts.identity import current_user
from adapters.tokens import User
from api.caching import depends_on_caller

if TYPE_CHECKING:
    from access.subscriber import AccessSubscriber
    from accounts.leaving import Deletions
    from adapters.bus import EventBus
    from adapters.db.pool import Database
    from adapters.github_api import GitHubGateway
    from adapters.mail.message import Mailer
    from adapters.stripe_api import StripeGateway
    from adapters.supabase_auth import SupabaseAuth
    from adapters.tokens import TokenVerifier
    from config import Settings
    from emails.kind import Senders
    from emails.render import Brand
    from support.service import Resends


class Collaborators(Protocol):
    """What the handlers use of the composition root's container (runtime/container.py,
    which sits above the handlers and is never imported by them)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def bus(self) -> EventBus: ...
    @property
    def stripe(self) -> StripeGateway: ...
    @property
    def supabase_auth(self) -> SupabaseAuth: ...
    @property
    def tokens(self) -> TokenVerifier: ...
    @property
    def github(self) -> GitHubGateway: ...
    @property
    def mailer(self) -> Mailer: ...
    @property
    def brand(self) -> Brand: ...
    @property
    def senders(self) -> Senders: ...
    @property
    def checkout_completion(self) -> AccessSubscriber: ...
    @property
    def account_deletions(self) -> Deletions: ...
    @property
    def email_resends(self) -> Resends: ...


_CALLER = "deps_caller"


def container() -> Collaborators:
    """The app's container, installed by `create_app`."""
    found: Collaborators = current_app.extensions["container"]
    return found


def caller(*, resuming_deletion: bool = False) -> User | None:
    """The signed-in user of this request; None for a guest, 401 for a bad token or a deleted
    account (`resuming_deletion`: DELETE /api/me asked again, which finishes its deletion)."""
    c = container()
    depends_on_caller()
    # A guard and its view both ask: the token is checked and the account read once a request.
    known: dict[bool, User | None] = g.setdefault(_CALLER, {})
    if resuming_deletion not in known:
        known[resuming_deletion] = current_user(
            authorization=request.headers.get("Authorization"),
            cookies=request.cookies,
            cookie_name=c.supabase_auth.cookie_name,
            tokens=c.tokens,
            db=c.db,
            resuming_deletion=resuming_deletion,
        )
    return known[resuming_deletion]
