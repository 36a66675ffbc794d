"""Limits: per-client request rates, a team's and a person's daily invitations, the proxies in
front that name the client, and how long any call to a vendor may take."""

from __future__ import annotations

from limits import parse_many
from pydantic import Field, field_validator

from config.checks import Group
from config.environment import Environment


class LimitSettings(Environment):
    # Per-client request limits ("N/second|minute|hour|day", `,` between several), per instance.
    rate_limit_lead: str = "10/minute,100/hour"
    rate_limit_sign_in: str = "20/minute"
    rate_limit_checkout: str = "10/minute,60/hour"
    rate_limit_portal: str = "10/minute"
    rate_limit_github_access: str = "5/minute,20/hour"
    rate_limit_me: str = "120/minute"
    # The success page asks once, perhaps again on a reload; each asks Stripe.
    rate_limit_complete_checkout: str = "20/minute"
    rate_limit_test_email: str = "3/minute,20/hour"
    # Creating teams and accepting invitations; sending invitations (each one is an e-mail).
    rate_limit_teams: str = "20/minute"
    rate_limit_invitations: str = "10/minute,100/hour"
    # Invitation mails (new or resent) one team sends in any 24 hours, whoever sends them and
    # from wherever: counted in Postgres, so across instances.
    team_invitations_per_day: int = Field(default=20, ge=1, le=10_000)
    # Invitation mails (new or resent) one person sends in any 24 hours from all their teams
    # together: a team made anew gives its creator no new day. Counted in Postgres too.
    invitations_per_person_per_day: int = Field(default=20, ge=1, le=10_000)
    # Proxies that append to X-Forwarded-For in front of the app (Cloud Run: 1; with an
    # external load balancer in front of Cloud Run: 2); the client is the entry before them.
    trusted_proxy_hops: int = Field(default=1, ge=0, le=5)
    # Every call to Stripe, Resend, GitHub and Supabase gives up after this many seconds, well
    # inside Pub/Sub's push acknowledgement deadline, so a stuck call fails and is retried.
    outbound_timeout_seconds: float = Field(default=8.0, gt=0, le=30)

    @field_validator(
        "rate_limit_lead",
        "rate_limit_sign_in",
        "rate_limit_checkout",
        "rate_limit_portal",
        "rate_limit_github_access",
        "rate_limit_me",
        "rate_limit_complete_checkout",
        "rate_limit_test_email",
        "rate_limit_teams",
        "rate_limit_invitations",
    )
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        try:
            parse_many(value)
        except ValueError as exc:
            raise ValueError(f"not a rate limit like '10/minute': {value!r}") from exc
        return value


GROUP = Group(fields=LimitSettings)
