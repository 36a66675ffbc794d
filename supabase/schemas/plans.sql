-- The retention coupon a cancelling customer accepted: once per customer, whoever asks twice at
-- the same moment (the primary key lets one claim through).
create table public.retention_offers (
  customer_id text primary key,
  coupon text not null,
  subscription_id text not null,
  accepted_at timestamptz not null default now()
);

-- Server only: no policy, nobody reads them through the API.
alter table public.retention_offers enable row level security;

-- A plan change a subscription's schedule holds for its period's end (POST
-- /api/payments/change-plan, a team's seats), shown on the entitlement until it takes effect;
-- undone by a resume or a cancellation.
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
