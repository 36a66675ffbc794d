-- Leaving: a person may delete their account. The deletion is recorded before any of its steps
-- (each idempotent, each marked done after it succeeded), so a crash half-way is finished by a
-- retry; what the founder must do by hand is left in a table the support API lists.

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
create unique index account_deletions_open_key on public.account_deletions (user_id)
  where finished_at is null;

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

-- Server only: no policy, nothing for the API roles.
alter table public.account_deletions enable row level security;
alter table public.founder_tasks enable row level security;
revoke all on public.account_deletions, public.founder_tasks from anon, authenticated;
