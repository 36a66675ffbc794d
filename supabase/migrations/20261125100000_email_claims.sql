-- An e-mail is claimed, sent with no transaction open, then recorded in sent_emails: a claim
-- without a sent_emails row is a send that may have happened (the process died, or Resend
-- failed); it is sent again with the same idempotency key, which Resend answers with the
-- first send instead of sending twice.
create table if not exists public.email_claims (
  event_id text not null,
  kind text not null,
  claimed_at timestamptz not null default now(),
  primary key (event_id, kind)
);
alter table public.email_claims enable row level security;
-- No policy: nobody reads it through the API.
