-- A plan change scheduled for a subscription's period end, shown on its entitlement (GET /api/me).

create table public.scheduled_changes (
  source_id text primary key,
  price_id text not null,
  quantity integer not null check (quantity > 0),
  effective_at timestamptz not null,
  schedule_id text not null,
  recorded_at timestamptz not null default now()
);

-- Server only: no policy, nobody reads them through the API.
alter table public.scheduled_changes enable row level security;
