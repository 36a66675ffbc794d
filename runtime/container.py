"""Builds each adapter once, on first use, from the settings: nothing dials out at import.

Each builder imports its own adapter, so a process loads only the SDKs it uses (the API loads
gRPC only to publish to Pub/Sub; the subscribers load Supabase Auth's admin client for guest
buyers' accounts and sign-in links, and access loads PyGithub to take a refunded repository back).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from config import MissingSetting, Settings, secret
from core.events import Event
from runtime.lazy import once
from runtime.targets import TARGETS

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from access.subscriber import AccessSubscriber
    from accounts.leaving import Deletions, Leaving
    from adapters.accounts import Accounts
    from adapters.bus import BatchHandler, EventBus
    from adapters.bus.pull import PullConsumer
    from adapters.db.pool import Database
    from adapters.github_api import GitHubGateway
    from adapters.mail.message import Mailer
    from adapters.stripe_api import StripeGateway
    from adapters.supabase_auth import SupabaseAuth
    from adapters.tokens import TokenVerifier
    from core.brand import Brand
    from credits.meter import UsageReporter
    from emails.kind import Senders
    from emails.subscriber import EmailSubscriber
    from runtime.dispatch import BatchFunction, Dispatch
    from support.service import Resends
    from topups.charge import TopUps


def brand_for(settings: Settings, *, default_site: str) -> Brand:
    """Who the e-mails speak for (BRAND_NAME, else the admin sender's display name), the site,
    the support inbox."""
    # Here, not at the top: the e-mail modules load an address validator, Jinja and the CSS
    # inliner, which neither the API's first request nor access needs.
    from core.brand import Brand

    site = str(settings.site_url) if settings.site_url else default_site
    return Brand(
        product_name=settings.product_name, site_url=site, support_email=settings.support_email
    )


class Container:
    """The service's collaborators, shared by the API and the subscriber targets."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def database_url(self) -> str:
        """DATABASE_URL; locally, `make run`, `make demo` and the tests start a Postgres."""
        if self.settings.database_url is None:
            raise MissingSetting(
                "DATABASE_URL is not set: `make run` starts a local Postgres and prints its URL"
            )
        return self.settings.database_url.get_secret_value()

    @once
    def db(self) -> Database:
        from adapters.db.pool import Database

        s = self.settings
        return Database(
            self.database_url,
            max_size=s.database_pool_size,
            connect_timeout=s.database_connect_timeout,
            statement_timeout=s.database_statement_timeout,
        )

    @once
    def stripe(self) -> StripeGateway:
        from adapters.stripe_api import StripeGateway

        s = self.settings
        return StripeGateway(
            api_key=secret(s.stripe_secret_key),
            api_base=str(s.stripe_api_base) if s.stripe_api_base else None,
            api_version=s.stripe_api_version,
            timeout=s.outbound_timeout_seconds,
        )

    @once
    def supabase_auth(self) -> SupabaseAuth:
        from adapters.supabase_auth import SupabaseAuth

        s = self.settings
        return SupabaseAuth(
            url=str(s.supabase_url) if s.supabase_url else None,
            anon_key=secret(s.supabase_publishable_key),
            timeout=s.outbound_timeout_seconds,
        )

    @once
    def tokens(self) -> TokenVerifier:
        from adapters.tokens import TokenVerifier

        s = self.settings
        return TokenVerifier(
            jwt_secret=s.jwt_secret,
            supabase_url=str(s.supabase_url) if s.supabase_url else None,
            timeout=s.outbound_timeout_seconds,
        )

    @once
    def accounts(self) -> Accounts:
        from adapters.accounts import LocalAccounts, SupabaseAccounts

        s = self.settings
        if s.supabase_url and s.supabase_secret_key:
            origin = s.site_origin
            return SupabaseAccounts(
                url=str(s.supabase_url),
                service_role_key=s.supabase_secret_key.get_secret_value(),
                redirect_to=origin + s.auth_callback_url if origin else None,
                timeout=s.outbound_timeout_seconds,
                link_lifetime=s.signin_link_lifetime_seconds,
            )
        if s.is_production:
            raise MissingSetting("SUPABASE_SECRET_KEY is required in production")
        if s.supabase_url:
            # Said once, when the subscribers are built (a process builds this once), never
            # discovered later as accounts that Supabase Auth does not know.
            log.warning(
                "SUPABASE_URL is set but SUPABASE_SECRET_KEY is not: guest buyers' accounts and"
                " sign-in links are made in the local database, not in Supabase Auth"
            )
        return LocalAccounts(self.db, signin_url=self.brand.url("/signin"))

    @once
    def github(self) -> GitHubGateway:
        from adapters.github_api import GitHubGateway

        s = self.settings
        return GitHubGateway(
            token=secret(s.github_token),
            api_url=str(s.github_api_url),
            timeout=s.outbound_timeout_seconds,
        )

    @once
    def mailer(self) -> Mailer:
        """Resend when RESEND_API_KEY is set, else the outbox folder; no client is built yet."""
        s = self.settings
        if s.resend_api_key is not None:
            from adapters.mail.resend import ResendMailer

            api_url = str(s.resend_api_url) if s.resend_api_url else None
            return ResendMailer(
                s.resend_api_key.get_secret_value(),
                api_url,
                timeout=s.outbound_timeout_seconds,
                rate_per_second=s.resend_rate_per_second,
            )
        from adapters.mail.outbox import OutboxMailer

        return OutboxMailer(s.email_outbox_dir)

    @once
    def brand(self) -> Brand:
        return brand_for(self.settings, default_site=f"http://localhost:{self.settings.port}")

    @once
    def senders(self) -> Senders:
        """Who each kind of e-mail comes from: the team, or no-reply for account mails."""
        from emails.kind import Senders

        s = self.settings
        return Senders(team=s.email_from_admin, noreply=s.email_from_noreply)

    @once
    def access_subscriber(self) -> AccessSubscriber:
        from access.subscriber import AccessSubscriber
        from teams import seats

        return AccessSubscriber(
            db=self.db,
            stripe=self.stripe,
            accounts=self.accounts,
            github=self.github,
            publish=self._publish,
            publish_seat_changes=seats.publish_changes,
            top_ups=self.top_ups.handle_many,
        )

    @once
    def top_ups(self) -> TopUps:
        """Charges the automatic top-ups claimed (`app.credits.top_up`), and grants or turns off
        those Stripe says were paid or failed (topups/charge.py)."""
        from topups.charge import TopUps

        return TopUps(self.db, self.stripe, self._publish)

    def _charge_top_ups(self, events: Sequence[Event]) -> list[str | Exception]:
        return [
            "ignored" if outcome is None else outcome
            for outcome in self.top_ups.handle_many(events)
        ]

    @once
    def overage_reporter(self) -> UsageReporter:
        """Reports consumptions' overage to Stripe's meters (`app.usage.recorded`)."""
        from credits.meter import UsageReporter

        return UsageReporter(self.db, self.stripe)

    @once
    def leaving(self) -> Leaving:
        """What an account deletion's steps call: where they run (the access target, the
        founder's `account-deletions resume`, or the api in one process)."""
        from accounts.leaving import Leaving

        return Leaving(
            db=self.db,
            stripe=self.stripe,
            github=self.github,
            accounts=self.accounts,
            bus=self.bus,
            redaction_api_version=self.settings.stripe_redaction_api_version,
        )

    @once
    def account_deletions(self) -> Deletions:
        """Account deletion as the api takes it. With the Pub/Sub design the api holds no
        secret key (deleting the Auth user takes Supabase's): it records the deletion and the
        access target runs its steps; in one process, the api runs them in the request."""
        from accounts.leaving import Deletions

        here = None if self.settings.event_bus == "pubsub" else self.leaving
        return Deletions(db=self.db, bus=self.bus, steps=here)

    def _resume_deletions(self, events: Sequence[Event]) -> list[str | Exception]:
        # The steps' collaborators are built on the first deletion, not with the subscriber:
        # the in-process bus is built from the subscribers, and the steps publish on it.
        from accounts import leaving

        return leaving.resume_requested_many(events, deps=self.leaving)

    @once
    def checkout_completion(self) -> AccessSubscriber:
        """The access cycle as the api runs it for the success page's completion. With the
        Pub/Sub design the api holds no service-role key: a guest's new account is left to the
        access target (and the page is told so); in one process, the access subscriber."""
        if self.settings.event_bus != "pubsub":
            return self.access_subscriber
        from access.subscriber import AccessSubscriber
        from adapters.accounts import ExistingAccounts
        from teams import seats

        return AccessSubscriber(
            db=self.db,
            stripe=self.stripe,
            accounts=ExistingAccounts(self.db),
            github=self.github,
            publish=self._publish,
            publish_seat_changes=seats.publish_changes,
        )

    def _publish(self, event: Event, data: bytes) -> None:
        # The bus is resolved on first publish, not when the subscriber is built: the in-process
        # bus is built from the subscribers, and the access subscriber publishes on it.
        self.bus.publish(event, data)

    @once
    def email_subscriber(self) -> EmailSubscriber:
        from emails.subscriber import EmailSubscriber

        return EmailSubscriber(
            db=self.db,
            mailer=self.mailer,
            brand=self.brand,
            accounts=self.accounts,
            senders=self.senders,
            reply_to=self.settings.support_email,
            resend=self._resend_requested,
        )

    def _resend_requested(self, event: Event) -> str:
        from support import service as support

        return support.resend_requested(event, db=self.db, mailer=self.mailer)

    @once
    def email_resends(self) -> Resends:
        """A resend as the api takes it. With the Pub/Sub design the api holds no Resend key
        (reading the copy back and sending it take it): it claims the resend and the emails
        target sends it; in one process, the api sends it in the request."""
        from support.service import Resends

        here = None if self.settings.event_bus == "pubsub" else self.mailer
        return Resends(db=self.db, bus=self.bus, mailer=here)

    def pushes(self, target: str) -> BatchHandler:
        """The push target's handler of a message's events (the api publishes the events of
        one type that come together as one message). Access applies the pushes a worker's
        threads hold at once as one batch, in one transaction (adapters/bus/coalesce.py): less
        CPU and less of Postgres's per change, and few transactions at once. E-mail takes each
        push's events on its own thread: its sends wait on Resend, and a shared batch sent
        one after another gave fewer mails a second for no CPU saved (bench/README.md)."""
        if target == "access":
            return self._access_pushes
        if target == "emails":
            return self.dispatch("emails").apply_many
        raise ValueError(f"unknown subscriber target {target!r}; expected one of {TARGETS}")

    @once
    def _access_pushes(self) -> BatchHandler:
        from adapters.bus import MESSAGE_EVENTS
        from adapters.bus.coalesce import Coalescer

        # As many events as the worker's threads can hold (a push carries up to MESSAGE_EVENTS).
        most = self.settings.gunicorn_threads * MESSAGE_EVENTS
        return Coalescer(self.dispatch("access").apply_many, max_batch=most)

    def subscriber(self, target: str) -> Callable[[Event], object]:
        """The subscriber behind one of `runtime.targets.TARGETS`."""
        return self.dispatch(target)

    def dispatch(self, target: str) -> Dispatch:
        """One of `runtime.targets.TARGETS`: its events, each to the handler
        `runtime/consumers.py` names for its type."""
        if target not in TARGETS:
            raise ValueError(f"unknown subscriber target {target!r}; expected one of {TARGETS}")
        # Built once per target, and only the one asked for: a target's process builds (and
        # reads the secrets of) its own handlers alone.
        if target not in self._dispatches:
            from functools import partial

            from runtime.consumers import handler_of
            from runtime.dispatch import Dispatch

            self._dispatches[target] = Dispatch(self._handlers(target), partial(handler_of, target))
        return self._dispatches[target]

    @once
    def _dispatches(self) -> dict[str, Dispatch]:
        return {}

    def _handlers(self, target: str) -> dict[str, BatchFunction]:
        """The batch function behind each handler `runtime/consumers.py` names for `target`."""
        if target == "access":
            from access.subscriber import log_outcomes

            def logged(handle: BatchFunction) -> BatchFunction:
                # The access target's line per event, as the cycle logs its own.
                def run(events: Sequence[Event]) -> Sequence[str | Exception]:
                    outcomes = handle(events)
                    log_outcomes(events, outcomes)
                    return outcomes

                return run

            return {
                "access": self.access_subscriber.apply_many,
                "overage": logged(self.overage_reporter.report_many),
                "deletion": logged(self._resume_deletions),
                "top-up": logged(self._charge_top_ups),
            }
        return {"mail": self.email_subscriber.send_many}

    @once
    def pull_consumer(self) -> PullConsumer:
        """FUNCTION_TARGET's subscriber fed by its pull subscription (SUBSCRIBER_DELIVERY=pull):
        access takes batches into one transaction, on two workers (one applies while the next
        gathers, as the in-process bus does); e-mail takes batches (two round trips each) on
        every thread, since its sends wait on Resend."""
        from adapters.bus.pull import LINGER_SECONDS, PullConsumer
        from runtime.consumers import subscription_of

        s = self.settings
        name = subscription_of(s.pubsub_topic, s.function_target)
        access = s.function_target == "access"
        return PullConsumer(
            subscription=f"projects/{s.google_cloud_project}/subscriptions/{name}",
            handle=self.dispatch(s.function_target).apply_many,
            batch_size=s.pull_batch_size if access else self._email_batch_size(),
            workers=2 if access else s.gunicorn_threads,
            # A receipt can wait a twentieth of a second for others to share its round trips.
            linger=LINGER_SECONDS if access else 0.05,
            max_messages=s.pull_max_messages,
            emulator_host=s.pubsub_emulator_host,
        )

    def _email_batch_size(self) -> int:
        """A batch's e-mails are claimed together, so its last one must go out within the
        claim's lease (after which another delivery may take it over) even when every worker
        waits its turn at the account's rate: at Resend's default 2/s and 16 threads, 7."""
        from emails.store import CLAIM_LEASE_SECONDS

        s = self.settings
        within_lease = s.resend_rate_per_second * CLAIM_LEASE_SECONDS / 2 / s.gunicorn_threads
        return max(1, min(s.pull_batch_size, int(within_lease)))

    @once
    def bus(self) -> EventBus:
        if self.settings.event_bus == "pubsub":
            from adapters.bus.pubsub import PubSubBus

            return PubSubBus.from_settings(self.settings)
        from adapters.bus.inline import InlineBus

        return InlineBus(
            {target: self.subscriber(target) for target in TARGETS},
            max_pending=self.settings.inline_bus_max_pending,
            max_backlog=self.settings.inline_bus_max_backlog,
            # In production e-mail is a service of its own; sharing this process, it lets the
            # webhook and access go first during a burst and mails the backlog after.
            background=("emails",),
            # Access takes the deliveries queued during a burst together: one transaction
            # applies them all (a push subscription hands them over one at a time).
            batches={"access": self.dispatch("access").apply_many},
        )

    def close(self) -> None:
        """Stop pulling, flush the bus and close the pool (on SIGTERM, at worker exit)."""
        if "pull_consumer" in self.__dict__:
            self.pull_consumer.stop()
        if "bus" in self.__dict__:
            self.bus.close()
        if "db" in self.__dict__:
            self.db.close()
