-- The addresses left on the landing page, one per address ignoring case.
create table public.leads (
  id uuid primary key default gen_random_uuid(),
  email text not null,
  created_at timestamptz not null default now()
);
create unique index leads_email_key on public.leads (lower(email));

-- Server only: no policy, nobody reads them through the API.
alter table public.leads enable row level security;
