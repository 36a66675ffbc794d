-- What the revenue metrics (`GET /api/admin/metrics`, docs/support.md) read, recorded by the
-- access cycle in the transaction of the access change each subscription event makes
-- (access/revenue.py): each subscription's MRR as last recorded, every movement of it, and
-- its cancellation with what its customer said. Server only: no policy, nobody reads them
-- through the API. No foreign key to accounts: a figure outlives the account that made it (a
-- deletion leaves an id that names no one).

-- A subscription's MRR, in its currency's minor unit, as the newest of its events said it.
create table public.mrr_levels (
  subscription_id text primary key,
  account_id uuid,
  currency text not null check (currency ~ '^[a-z]{3}$'),
  amount bigint not null check (amount >= 0),
  at timestamptz not null,
  rank smallint not null,
  event_id text not null
);
alter table public.mrr_levels enable row level security;

-- One row per event that moved a subscription's MRR: a redelivered event moves it once.
create table public.mrr_movements (
  event_id text primary key,
  subscription_id text not null,
  account_id uuid,
  currency text not null check (currency ~ '^[a-z]{3}$'),
  delta bigint not null check (delta <> 0),
  kind text not null check (kind in ('new', 'expansion', 'contraction', 'churn')),
  at timestamptz not null
);
create index mrr_movements_at on public.mrr_movements (at);
alter table public.mrr_movements enable row level security;

-- A subscription's cancellation (ended, or set to end), dated when it was first asked for, with
-- Stripe's `cancellation_details`: the feedback and reason kept, of the comment only whether
-- there was one (free text a person wrote, which the metrics do not need).
create table public.subscription_cancellations (
  subscription_id text primary key,
  account_id uuid,
  cancelled boolean not null,
  feedback text,
  has_comment boolean not null default false,
  reason text,
  cancelled_at timestamptz,
  changed_at timestamptz not null,
  rank smallint not null,
  event_id text not null,
  constraint subscription_cancellations_dated check (cancelled = (cancelled_at is not null))
);
create index subscription_cancellations_at on public.subscription_cancellations (cancelled_at)
  where cancelled;
alter table public.subscription_cancellations enable row level security;

-- What the access cycle reads of them beside its claim (access/store.py): the levels of the
-- subscriptions a batch names and the catalogue's prices its events carry no amount for (a
-- price's currency as the metrics' MRR reads it: the catalogue's, else that of the newest
-- purchase at that price, for a row synced before prices kept one). A plpgsql function reads
-- with a snapshot of its own, taken after the claim's locks.
create or replace function public.revenue_read(p_subscriptions text[], p_prices text[])
returns jsonb
language plpgsql
volatile
set search_path = ''
as $$
declare
  found jsonb;
begin
  select jsonb_build_object(
    'levels', coalesce((
      select jsonb_agg(jsonb_build_object('subscription_id', l.subscription_id,
        'currency', l.currency, 'amount', l.amount, 'at', l.at, 'rank', l.rank))
      from public.mrr_levels l where l.subscription_id = any(p_subscriptions)), '[]'),
    'prices', coalesce((
      select jsonb_agg(jsonb_build_object('price_id', p.stripe_price_id, 'price', p.price,
        'interval', p.billing_interval, 'currency', coalesce(p.currency, (
          select pu.currency from public.purchases pu
          where pu.product_id = p.id and pu.currency is not null
          order by pu.created_at desc limit 1))))
      from public.products p where p.stripe_price_id = any(p_prices)), '[]')
  ) into found;
  return found;
end
$$;

revoke execute on function public.revenue_read(text[], text[]) from public, anon, authenticated;
