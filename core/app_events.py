"""The application's own events (`app.*`), published on the same bus as Stripe's once a change
is committed; the e-mails that speak of a change are sent from these, so none tells of a change
that did not happen. Never accepted from the webhook."""

from __future__ import annotations

# The access subscriber: a checkout's access was granted, or access was taken back.
ACCESS_GRANTED = "app.access.granted"
ACCESS_REVOKED = "app.access.revoked"
# A guest buyer's account exists and has access: they get a sign-in link by e-mail.
ACCOUNT_INVITED = "app.account.invited"
# A trial the customer still holds ends in three days (Stripe's `trial_will_end`): they are told.
TRIAL_ENDING = "app.trial.ending"
# Sign-up: a new account is welcomed.
ACCOUNT_CREATED = "app.account.created"
# A buyer was invited to a product's GitHub repository.
GITHUB_ACCESS_GRANTED = "app.github_access.granted"
# A team's owner or admin invited someone by e-mail (the accept link carries the token).
TEAM_INVITED = "app.team.invited"
# A team's seats fell below its members (the newest lose theirs), or were added back.
TEAM_SEAT_LOST = "app.team.seat_lost"
TEAM_SEAT_RESTORED = "app.team.seat_restored"
# A person deleted their account: they are told, at the address they had.
ACCOUNT_DELETED = "app.account.deleted"
# A person's account deletion is recorded (with the Pub/Sub design): the access target, which
# holds the keys its steps need (the api holds none), runs them (accounts/leaving.py).
ACCOUNT_DELETION_REQUESTED = "app.account.deletion_requested"
# An admin asked to send a sent e-mail again (with the Pub/Sub design): the emails target,
# which holds the Resend key (the api holds none), reads the copy back and sends it, once
# (support/service.py `resend_requested`).
EMAIL_RESEND_REQUESTED = "app.email.resend_requested"
# A consumption went beyond the credits of an account billed on a meter: its overage is
# reported to Stripe's meter (`credits/meter.py`), once per consumption key.
USAGE_RECORDED = "app.usage.recorded"
# The previous release's announcement of a balance under 10% of its grant (still mailed).
CREDITS_LOW = "app.credits.low"
# A consumption took what was used of a grant to one of CREDITS_ALERTS' percentages: its holder
# is told, once per threshold and period; the founder's own systems may subscribe to it too.
CREDITS_THRESHOLD = "app.credits.threshold"
# A consumption left a balance below its holder's automatic top-up threshold and claimed the
# top-up: the access target charges the pack off-session (topups/charge.py), once per claim.
CREDITS_TOP_UP = "app.credits.top_up"
# An automatic top-up's charge was declined or needs the holder's authentication: top-up is
# turned off for the feature and the payer is told, once per claim.
CREDITS_TOP_UP_FAILED = "app.credits.top_up_failed"

APP_EVENTS = frozenset(
    {
        ACCESS_GRANTED,
        ACCESS_REVOKED,
        ACCOUNT_INVITED,
        TRIAL_ENDING,
        ACCOUNT_CREATED,
        GITHUB_ACCESS_GRANTED,
        TEAM_INVITED,
        TEAM_SEAT_LOST,
        TEAM_SEAT_RESTORED,
        ACCOUNT_DELETED,
        ACCOUNT_DELETION_REQUESTED,
        EMAIL_RESEND_REQUESTED,
        USAGE_RECORDED,
        CREDITS_LOW,
        CREDITS_THRESHOLD,
        CREDITS_TOP_UP,
        CREDITS_TOP_UP_FAILED,
    }
)
