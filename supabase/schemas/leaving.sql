-- Leaving: an account deletion recorded before any of its steps, and the tasks left to the
-- founder that no API can do for them.

-- One row per deletion asked for. `plan` is what the steps need, read once when it was asked
-- for (the subscriptions to cancel, the repositories to leave, the Stripe customers to redact,
-- the address to tell), because each step deletes what the next would have read; it and
-- `email` are cleared when the deletion finishes, so what stays is who, when and which steps
-- ran. `steps_done` grows one name per step, each written after its step succeeded: a retry
-- does the rest (core/leaving.py). Server only.
create table public.account_deletions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null,
  email text,
  plan jsonb not null default '{}'::jsonb,
  steps_done text[] not null default '{}',
  last_error text,
  -- Held by the call running its steps (a lease, so a call that died gives it up): two calls
  -- at once never run the same step twice.
  running_until timestamptz,
  requested_at timestamptz not null default now(),
  finished_at timestamptz
);
-- One deletion of a person under way at a time: asking again resumes it.
create unique index account_deletions_open_key on public.account_deletions (user_id)
  where finished_at is null;

-- What the founder must do by hand (a Stripe customer to redact in the Dashboard where the
-- account may not use Stripe's redaction jobs, ...), listed by the support API. `subject` is
-- what the task is about (a Stripe customer id), once per kind. Server only.
create table public.founder_tasks (
  id uuid primary key default gen_random_uuid(),
  kind text not null,
  subject text not null,
  detail text not null,
  deletion_id uuid references public.account_deletions (id) on delete set null,
  created_at timestamptz not null default now(),
  done_at timestamptz,
  unique (kind, subject)
);

-- The Stripe customers of accounts a deletion removed. Stripe still sends their events (the
-- cancellation the deletion asked for, a late renewal's failure): the access cycle finds no
-- account for them and, for a customer named here, settles the event as ignored instead of
-- retrying it into the dead letters. A Stripe id is no personal data. Server only.
create table public.erased_customers (
  customer_id text primary key,
  erased_at timestamptz not null default now()
);

alter table public.account_deletions enable row level security;
alter table public.founder_tasks enable row level security;
alter table public.erased_customers enable row level security;
