"""What handlers receive from the composition root."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from flask import current_app, g, request

from adapters.tokens import User
from api.caching import depends_on_caller
from api.identity import current_user

if TYPE_CHECKING:
    from adapters.bus import EventBus
    from adapters.db.pool import Database
    from adapters.github_api import GitHubGateway
    from adapters.mail.message import Mailer
    from adapters.stripe_api import StripeGateway
    from adapters.supabase_auth import SupabaseAuth
    from adapters.tokens import TokenVerifier
    from config import Settings
    from core.brand import Brand


class Collaborators(Protocol):
    """What every domain's routes use of the composition root's container
    (runtime/container.py, which sits above the domains and is never imported by them). What
    one domain's routes alone use is in that domain's own Protocol beside them."""

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
