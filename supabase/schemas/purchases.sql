-- A completed checkout. `paid` comes from its payment status (and
-- checkout.session.async_payment_succeeded); `refunded_at` marks a full refund.
create table public.purchases (
  id uuid primary key default gen_random_uuid(),
  -- The buyer, and the account that paid.
  user_id uuid references public.profiles (id) on delete set null,
  account_id uuid references public.accounts (id) on delete set null,
  product_id uuid references public.products (id) on delete set null,
  stripe_checkout_session_id text not null unique,
  stripe_customer_id text,
  stripe_payment_intent_id text,
  customer_email text,
  amount_total bigint,
  currency text,
  paid boolean not null default false,
  amount_refunded bigint not null default 0,
  refunded_at timestamptz,
  created_at timestamptz not null default now(),
  -- The quantity a checkout was bought with (its line item's): a per-seat price's seats.
  quantity integer check (quantity > 0)
);
create index purchases_user_idx on public.purchases (user_id);
create index purchases_payment_intent_idx on public.purchases (stripe_payment_intent_id);

-- The one GitHub account each repository purchase was delivered to.
create table public.github_grants (
  id uuid primary key default gen_random_uuid(),
  purchase_id uuid not null unique references public.purchases (id) on delete cascade,
  user_id uuid not null references public.profiles (id) on delete cascade,
  github_username text not null,
  granted_at timestamptz not null default now()
);
create index github_grants_user_idx on public.github_grants (user_id);

alter table public.purchases enable row level security;
alter table public.github_grants enable row level security;

-- `user_id` is who paid, for the books: the rows a person reads are their own account's
-- purchases and, while they are a member, their teams' ("purchases: members read their teams",
-- teams.sql).
create policy "purchases: own rows" on public.purchases
  for select to authenticated
  using (
    account_id in (
      select a.id from public.accounts a
      where a.kind = 'personal' and a.owner_id = (select auth.uid()))
  );

create policy "github_grants: own rows" on public.github_grants
  for select to authenticated
  using (user_id = (select auth.uid()));

grant select on public.purchases, public.github_grants to authenticated;
