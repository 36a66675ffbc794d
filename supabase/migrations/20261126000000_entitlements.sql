-- Access per grant: one row per subscription (source_id: its id) and per one-time purchase
-- (source_id: its checkout session). A subscription's end ends only its own row, a refund only
-- its purchase's; profiles.has_access stays, derived by the access subscriber: true while any of
-- the profile's rows is active.
create table if not exists public.entitlements (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.profiles (id) on delete cascade,
  source_id text not null unique,
  kind text not null check (kind in ('subscription', 'purchase')),
  price_id text,
  -- Stripe's subscription status; `paid` or `refunded` for a purchase.
  status text not null,
  active boolean not null,
  current_period_end timestamptz,
  cancel_at_period_end boolean not null default false,
  trial_end timestamptz,
  ended_at timestamptz,
  -- Stripe `created` of the newest change applied to this row, so older events cannot undo it.
  changed_at timestamptz,
  event_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists entitlements_user_idx on public.entitlements (user_id);
create trigger entitlements_touch before update on public.entitlements
  for each row execute function public.touch_updated_at();

alter table public.entitlements enable row level security;
create policy "entitlements: own rows or admin" on public.entitlements
  for select to authenticated
  using (user_id = (select auth.uid()) or (select public.is_admin()));
grant select on public.entitlements to authenticated;

-- A product may offer a free trial: checkout passes its length to Stripe.
alter table public.products
  add column if not exists trial_days integer check (trial_days between 1 and 730);

-- Today's data carried over. Paid one-time purchases: one row each, ended if refunded.
insert into public.entitlements
  (user_id, source_id, kind, price_id, status, active, ended_at, changed_at)
select pu.user_id, pu.stripe_checkout_session_id, 'purchase', pr.stripe_price_id,
  case when pu.refunded_at is null then 'paid' else 'refunded' end,
  pu.refunded_at is null, pu.refunded_at, coalesce(pu.refunded_at, pu.created_at)
from public.purchases pu
join public.products pr on pr.id = pu.product_id
where pu.paid and pu.user_id is not null and pr.billing_type = 'one_time'
on conflict (source_id) do nothing;

-- Access the purchases above do not explain came from a subscription, whose id was not kept:
-- one row per such profile, which the first event of one of its subscriptions adopts.
insert into public.entitlements
  (user_id, source_id, kind, price_id, status, active, changed_at, event_id)
select p.id, 'profile:' || p.id::text, 'subscription', p.price_id, 'active', true,
  p.access_changed_at, p.access_event_id
from public.profiles p
where p.has_access
  and not exists (
    select 1 from public.entitlements e where e.user_id = p.id and e.active
  )
on conflict (source_id) do nothing;
