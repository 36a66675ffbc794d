-- The revenue metrics (MRR movements, cancellation reasons) recorded by the access cycle as
-- subscription events are applied: the definitions and their reasons are in
-- supabase/schemas/revenue.sql.

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

-- The subscriptions paying when this file is applied start from their MRR as the metrics count
-- it today (the catalogue's price times a per-seat team's seats, a year's by twelve): their next
-- event moves it from there, instead of counting them as new. Dated by their last change, so
-- an older event delivered late moves nothing.
insert into public.mrr_levels (subscription_id, account_id, currency, amount, at, rank, event_id)
select e.source_id, e.account_id, c.currency,
  round(pr.price * (case when c.currency in ('bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw',
    'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf') then 1
    when c.currency in ('bhd', 'jod', 'kwd', 'omr', 'tnd') then 1000 else 100 end)
    * (case when pr.per_seat then coalesce(t.quantity, 1) else 1 end)
    / (case pr.billing_interval when 'year' then 12 else 1 end))::bigint,
  e.changed_at, 1, 'baseline'
from public.entitlements e
join public.products pr on pr.stripe_price_id = e.price_id
left join public.teams t on t.id = e.account_id
cross join lateral (select coalesce(pr.currency, (select pu.currency from public.purchases pu
  where pu.product_id = pr.id and pu.currency is not null
  order by pu.created_at desc limit 1)) as currency) c
where e.kind = 'subscription' and e.active and e.status in ('active', 'past_due')
  and e.changed_at is not null and pr.billing_interval in ('month', 'year')
  and c.currency ~ '^[a-z]{3}$'
on conflict (subscription_id) do nothing;
