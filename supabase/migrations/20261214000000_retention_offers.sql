-- A retention coupon applies at most once per customer: the accepted offers, one row each.

create table public.retention_offers (
  customer_id text primary key,
  coupon text not null,
  subscription_id text not null,
  accepted_at timestamptz not null default now()
);

-- Server only: no policy, nobody reads them through the API.
alter table public.retention_offers enable row level security;
