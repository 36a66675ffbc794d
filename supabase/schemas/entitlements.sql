-- Access per grant: one row per subscription (source_id: its id), per one-time purchase
-- (source_id: its checkout session) and per complimentary grant an admin gave (kind `comp`,
-- source_id `comp_<id>`, until `current_period_end`, or for good when it is null). A subscription's end ends only its own row, a refund only
-- its purchase's; an account's has_access is derived from them.
create table public.entitlements (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null references public.accounts (id) on delete cascade,
  source_id text not null unique,
  kind text not null check (kind in ('subscription', 'purchase', 'comp')),
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
  updated_at timestamptz not null default now(),
  -- A comp's cause: the admin who gave it and why (the audit log has the call itself).
  granted_by uuid,
  reason text,
  -- The Stripe customer who pays it (a subscription's own, one of the account's customers):
  -- the one its meter's overage is reported on (credits.sql, `credit_billing`).
  customer_id text,
  -- Whether a payment method backs the subscription (its `default_payment_method` or
  -- `default_source`), as its latest event said; null: not said yet. A trial without one is
  -- cancelled at its end, so nobody would pay its overage.
  payment_method boolean
);
create index entitlements_account_idx on public.entitlements (account_id);
create trigger entitlements_touch before update on public.entitlements
  for each row execute function public.touch_updated_at();

alter table public.entitlements enable row level security;

-- Their own personal account's grants; a team's while they are its member (teams.sql).
create policy "entitlements: own rows or admin" on public.entitlements
  for select to authenticated
  using (
    account_id in (
      select a.id from public.accounts a
      where a.kind = 'personal' and a.owner_id = (select auth.uid()))
    or (select public.is_admin())
  );

-- Every column but a comp's admin and reason (`granted_by`, `reason`): the support API's alone.
grant select (
  id, account_id, source_id, kind, price_id, status, active, current_period_end,
  cancel_at_period_end, trial_end, ended_at, changed_at, event_id, created_at, updated_at
) on public.entitlements to authenticated;
