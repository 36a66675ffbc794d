-- One row per (event, e-mail kind) sent; the Resend idempotency key covers a crash before it.
create table public.sent_emails (
  event_id text not null,
  kind text not null,
  recipient text not null,
  provider_id text,
  sent_at timestamptz not null default now(),
  primary key (event_id, kind)
);

-- An e-mail is claimed, sent with no transaction open, then recorded in sent_emails: a claim
-- without a sent_emails row is a send that may have happened; it is sent again with the same
-- idempotency key, which Resend answers with the first send. `holder`: the delivery holding it,
-- which gets its own claim back instead of waiting out the lease.
create table public.email_claims (
  event_id text not null,
  kind text not null,
  holder text,
  claimed_at timestamptz not null default now(),
  primary key (event_id, kind)
);

-- Server only: no policy, nobody reads them through the API.
alter table public.sent_emails enable row level security;
alter table public.email_claims enable row level security;
