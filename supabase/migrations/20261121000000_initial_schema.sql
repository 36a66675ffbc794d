-- Profiles, products, purchases and leads, with row-level security as Supabase serves them.

create or replace function public.touch_updated_at() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.updated_at := now();
  return new;
end
$$;

create table public.profiles (
  id uuid primary key references auth.users (id) on delete cascade,
  email text,
  name text,
  customer_id text unique,
  price_id text,
  has_access boolean not null default false,
  is_admin boolean not null default false,
  -- Stripe `created` of the newest access change applied, so older events cannot undo it.
  access_changed_at timestamptz,
  access_event_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index profiles_email_idx on public.profiles (lower(email));
create trigger profiles_touch before update on public.profiles
  for each row execute function public.touch_updated_at();

create table public.products (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  description text not null default '',
  price numeric(12, 2) not null check (price >= 0),
  stripe_price_id text not null unique check (stripe_price_id like 'price\_%'),
  type text not null check (type in ('github', 'link')),
  billing_type text not null check (billing_type in ('one_time', 'subscription')),
  billing_interval text check (billing_interval in ('month', 'year')),
  is_active boolean not null default true,
  is_featured boolean not null default false,
  github_repo text,
  download_url text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
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

create table public.purchases (
  id uuid primary key default gen_random_uuid(),
  user_id uuid references public.profiles (id) on delete set null,
  product_id uuid references public.products (id) on delete set null,
  stripe_checkout_session_id text not null unique,
  stripe_customer_id text,
  customer_email text,
  amount_total bigint,
  currency text,
  created_at timestamptz not null default now()
);
create index purchases_user_idx on public.purchases (user_id);

create table public.leads (
  id uuid primary key default gen_random_uuid(),
  email text not null,
  created_at timestamptz not null default now()
);
create unique index leads_email_key on public.leads (lower(email));

-- Idempotency: one row per (consumer, event) applied, written in the same transaction as the effect.
create table public.processed_events (
  consumer text not null,
  event_id text not null,
  event_type text not null,
  event_created timestamptz not null,
  outcome text not null,
  processed_at timestamptz not null default now(),
  primary key (consumer, event_id)
);

-- One row per (event, e-mail kind) sent; the Resend idempotency key covers a crash before this row.
create table public.sent_emails (
  event_id text not null,
  kind text not null,
  recipient text not null,
  provider_id text,
  sent_at timestamptz not null default now(),
  primary key (event_id, kind)
);

-- A new auth user gets a profile.
create or replace function public.handle_new_user() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  insert into public.profiles (id, email, name)
  values (
    new.id,
    new.email,
    coalesce(new.raw_user_meta_data ->> 'full_name', new.raw_user_meta_data ->> 'name')
  )
  on conflict (id) do nothing;
  return new;
end
$$;

create trigger on_auth_user_created
  after insert on auth.users
  for each row execute function public.handle_new_user();

-- Security definer so the profiles policy can ask about admins without recursing into itself.
create or replace function public.is_admin() returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce((select p.is_admin from public.profiles p where p.id = auth.uid()), false)
$$;

alter table public.profiles enable row level security;
alter table public.products enable row level security;
alter table public.purchases enable row level security;
alter table public.leads enable row level security;
alter table public.processed_events enable row level security;
alter table public.sent_emails enable row level security;

create policy "profiles: own row or admin" on public.profiles
  for select to authenticated
  using (id = (select auth.uid()) or (select public.is_admin()));

create policy "products: active ones for everyone" on public.products
  for select to anon, authenticated
  using (is_active);

create policy "products: all for admins" on public.products
  for select to authenticated
  using ((select public.is_admin()));

create policy "purchases: own rows" on public.purchases
  for select to authenticated
  using (user_id = (select auth.uid()));

-- leads, processed_events and sent_emails have no policy: nobody reads them through the API.

grant select on public.profiles, public.products, public.purchases to authenticated;
grant select on public.products to anon;
grant execute on function public.is_admin() to anon, authenticated;
