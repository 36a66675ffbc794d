-- The catalogue: one row per Stripe price, written from Stripe (`flask --app main products
-- sync`, and product and price events), never by hand. Anyone reads the active products, all
-- but their download links.

create table public.products (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  description text not null default '',
  price numeric(12, 2) not null check (price >= 0),
  stripe_price_id text not null unique check (stripe_price_id like 'price\_%'),
  type text not null check (type in ('github', 'link')),
  billing_type text not null check (billing_type in ('one_time', 'subscription')),
  billing_interval text check (billing_interval in ('month', 'year')),
  -- A free trial: checkout passes its length to Stripe.
  trial_days integer check (trial_days between 1 and 730),
  is_active boolean not null default true,
  is_featured boolean not null default false,
  github_repo text,
  download_url text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- What a product grants beyond access, and how it is sold: the catalogue fills both from
  -- Stripe (a product's Entitlements features, else its `features` metadata; its `per_seat`
  -- metadata). Features are lowercase slugs, so a policy or a route guard names them exactly.
  features text[] not null default '{}'
    check (array_position(features, null) is null),
  per_seat boolean not null default false,
  -- Its Stripe product, so a product's change reaches all its prices, and the Stripe time of
  -- the state the row holds, so an older event arriving late never overwrites a newer state.
  stripe_product_id text,
  synced_at timestamptz,
  -- The credits a purchase grants (feature -> amount; docs/credits.md), granted at each paid
  -- period (`period`) or once (`once`, kept `credits_expire_days` or until used), and the
  -- Stripe meter event consumption beyond them is billed on.
  credits jsonb not null default '{}'::jsonb check (jsonb_typeof(credits) = 'object'),
  credits_period text check (credits_period in ('period', 'once')),
  credits_expire_days integer check (credits_expire_days between 1 and 3650),
  meter text,
  -- What selling worldwide reads: the price's currency (lower-case ISO 4217, as Stripe gives
  -- it) and tax behaviour (whether its amount includes tax), and the product's Stripe Tax code
  -- (Managed Payments sells only products that have one).
  currency text check (currency ~ '^[a-z]{3}$'),
  tax_behavior text not null default 'unspecified'
    check (tax_behavior in ('inclusive', 'exclusive', 'unspecified')),
  tax_code text,
  -- How a buyer reads each feature (key -> Stripe's Entitlements feature `name`); a feature
  -- without one is shown by its key.
  feature_names jsonb not null default '{}'::jsonb check (jsonb_typeof(feature_names) = 'object'),
  -- The overage units a subscription's meter may bill per billing period (docs/credits.md);
  -- null: no cap.
  overage_cap integer check (overage_cap between 1 and 1000000000),
  -- A pack a holder may choose for automatic top-up (`top_up` metadata; docs/credits.md).
  top_up boolean not null default false,
  constraint products_interval_matches_billing check (
    (billing_type = 'one_time' and billing_interval is null)
    or (billing_type = 'subscription' and billing_interval is not null)
  ),
  constraint products_delivery check (
    (type = 'github' and github_repo is not null) or type = 'link'
  )
);
create trigger products_touch before update on public.products
  for each row execute function public.touch_updated_at();
create index products_stripe_product_id on public.products (stripe_product_id);

alter table public.products enable row level security;

create policy "products: active ones for everyone" on public.products
  for select to anon, authenticated
  using (is_active);

create policy "products: all for admins" on public.products
  for select to authenticated
  using ((select public.is_admin()));

-- Every column but the download link, which reaches a product's holders only, through the API
-- (`GET /api/me`): a query names its columns (`select=*` is refused).
grant select (
  id, name, description, price, stripe_price_id, type, billing_type, billing_interval,
  trial_days, is_active, is_featured, github_repo, created_at, updated_at, features, per_seat,
  stripe_product_id, synced_at, credits, credits_period, credits_expire_days, meter, currency,
  tax_behavior, tax_code
) on public.products to anon, authenticated;
