-- Automatic top-up: a pack marked `top_up` in its product's metadata, charged off-session when
-- a consumption leaves a balance below the holder's threshold (docs/credits.md).

alter table public.products
  add column top_up boolean not null default false;

-- Automatic top-up (docs/credits.md, "Automatic top-up"): an account's choice, per feature, of
-- a pack (`price_id`, a one-time price whose product has `top_up` metadata) charged off-session
-- when a consumption leaves the balance below `below`. Turned off (`enabled` false) rather
-- than deleted, so `crossings` keeps counting: each claim's charge carries its number in its
-- Stripe idempotency key, and a number is never used twice for an account and feature. A claim
-- in flight (`claimed_at`) holds off every other until its pack is granted or its charge fails:
-- at most one top-up per account and feature at a time, whatever the concurrency.
create table public.credit_top_ups (
  account_id uuid not null references public.accounts (id) on delete cascade,
  feature text not null check (feature ~ '^[a-z0-9]+([-_][a-z0-9]+)*$'),
  price_id text not null,
  below integer not null check (below between 1 and 1000000000),
  enabled boolean not null default true,
  crossings bigint not null default 0,
  claimed_at timestamptz,
  -- The payment intent of the claim's charge, once Stripe made it.
  payment_intent text,
  updated_at timestamptz not null default now(),
  primary key (account_id, feature)
);
alter table public.credit_top_ups enable row level security;
