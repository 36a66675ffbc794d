-- Credits: what a purchase grants to consume (`generations`, `api-calls`), and what was consumed.
-- A grant is written by the access cycle's one write (ordered and applied once like every grant:
-- docs/credits.md); a consumption is one call of `public.consume_credits`, which decides and
-- consumes in one statement under the grants' row locks, so parallel calls never overdraw.

-- One grant of credits of one feature to one account (a team's account: one pool its seated
-- members share). `source` is what granted it: `<subscription>@<period start>` for a paid
-- period, `<subscription>` for a subscription's `once` credits, the checkout session for a pack.
create table public.credit_grants (
  id bigint generated always as identity primary key,
  account_id uuid not null references public.accounts (id) on delete cascade,
  feature text not null check (feature ~ '^[a-z0-9]+([-_][a-z0-9]+)*$'),
  source text not null,
  kind text not null check (kind in ('period', 'once')),
  -- The subscription whose period (or first payment) granted it: its end ends them.
  subscription_id text,
  amount integer not null check (amount > 0),
  used integer not null default 0,
  starts_at timestamptz not null,
  -- A period's end, or a pack's `credits_expire_days` after its purchase; null: until used.
  expires_at timestamptz,
  -- Taken back (a refunded pack, an ended subscription) or replaced (the next paid period).
  ended_at timestamptz,
  event_id text,
  created_at timestamptz not null default now(),
  constraint credit_grants_used_within check (used between 0 and amount),
  constraint credit_grants_once_per_source unique (source, feature)
);
create index credit_grants_account_feature on public.credit_grants (account_id, feature);
create index credit_grants_subscription on public.credit_grants (subscription_id)
  where subscription_id is not null;

-- One consumption per idempotency key: the first answer is kept and given again. `covered` was
-- drawn from grants (`draws`: [{"grant": id, "amount": n}], what a release gives back);
-- `overage` goes beyond them, billed on the meter `meter` to the customer `customer_id` (the
-- customer of the subscription carrying the meter), reported once (`reported_at`).
create table public.credit_uses (
  key text primary key check (length(key) between 1 and 100),
  account_id uuid not null references public.accounts (id) on delete cascade,
  feature text not null,
  amount integer not null check (amount > 0),
  state text not null check (state in ('consumed', 'refused', 'reserved', 'released')),
  covered integer not null default 0 check (covered >= 0),
  overage integer not null default 0 check (overage >= 0),
  balance integer not null,
  draws jsonb not null default '[]'::jsonb,
  meter text,
  customer_id text,
  -- The person who consumed (through `credit_take_for`): their key answers them the same,
  -- whichever pool they draw from later.
  user_id uuid,
  -- The overage's report to the meter: claimed by a reporter (`report_claim`, its token, so a
  -- claim sent again after a broken connection is its own; a lease: a reporter that crashed
  -- leaves it to the next after a while), done, or given up (past Stripe's 35-day window).
  report_claim uuid,
  report_claimed_at timestamptz,
  reported_at timestamptz,
  report_error text,
  created_at timestamptz not null default now(),
  settled_at timestamptz,
  -- The first request's answer (a route's status, content type and body), given again to a
  -- request sent again with its key: the work behind a key runs once.
  answer_status integer,
  answer_type text,
  answer_body bytea,
  -- What a reservation asked for (its `amount` becomes what the work took): a key sent again
  -- is compared with it.
  reserved integer,
  -- The request the kept answer answered (a digest of its method, path and body): a key sent
  -- again with another request is refused, never given another request's answer.
  answer_request text,
  -- Refused because the overage would pass its product's cap for the period (`overage_cap`).
  capped boolean not null default false
);
create index credit_uses_account_feature on public.credit_uses (account_id, feature);
create index credit_uses_unreported on public.credit_uses (created_at)
  where overage > 0 and reported_at is null;
-- The overage of a period, summed against its cap.
create index credit_uses_overage on public.credit_uses (account_id, feature, created_at)
  where overage > 0;

-- Server only: no policy; a person reads their own balance through `credits_of`.
alter table public.credit_grants enable row level security;
alter table public.credit_uses enable row level security;

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

-- The grants that count now: not ended, not expired.
create or replace function public.credit_live(p_account uuid, p_feature text)
returns setof public.credit_grants
language sql
stable
set search_path = ''
as $$
  select g.* from public.credit_grants g
  where g.account_id = p_account and g.feature = p_feature and g.ended_at is null
    and (g.expires_at is null or g.expires_at > now())
$$;

-- Who pays an account's consumption beyond its credits of a feature: the meter and the Stripe
-- customer of the subscription carrying it (a subscription to a product that names a meter and
-- grants the feature, as credits or as a feature). The rule: only a subscription Stripe will
-- charge bills overage: `active` (paid), or on trial with a payment method behind it (a trial
-- without one is cancelled at its end, and nobody pays; a trial's paid invoice of nothing says
-- `active`, so its `trial_end` says it is one). A complimentary grant, a past-due or ended
-- subscription, one whose customer is not known: none, so the consumption is refused.
-- `cap`: the product's `overage_cap`, the overage units allowed per billing period, the period
-- starting `since` (the subscription's period end less its interval; unknown: the last month).
create or replace function public.credit_overage_terms(p_account uuid, p_feature text)
returns table (meter text, customer_id text, cap integer, since timestamptz)
language sql
stable
set search_path = ''
as $$
  select p.meter, e.customer_id, p.overage_cap,
    coalesce(e.current_period_end - case p.billing_interval when 'year' then interval '1 year'
      else interval '1 month' end, now() - interval '1 month')
  from public.entitlements e
  join public.products p on p.stripe_price_id = e.price_id
  where e.account_id = p_account and e.active and e.kind = 'subscription'
    and e.customer_id is not null
    and e.status in ('active', 'trialing')
    and (e.payment_method or (e.status = 'active' and coalesce(e.trial_end <= now(), true)))
    and p.meter is not null and (p.credits ? p_feature or p_feature = any(p.features))
  order by p.meter, e.source_id limit 1
$$;

-- The meter and the customer (`credit_overage_terms`) without the cap.
create or replace function public.credit_billing(p_account uuid, p_feature text)
returns table (meter text, customer_id text)
language sql
stable
set search_path = ''
as $$
  select t.meter, t.customer_id from public.credit_overage_terms(p_account, p_feature) t
$$;

-- The overage units an account's consumptions of a feature took since `p_since` (a
-- reservation's counted at what it drew until it is settled), against the cap.
create or replace function public.credit_overage_used(
  p_account uuid, p_feature text, p_since timestamptz
) returns integer
language sql
stable
set search_path = ''
as $$
  select coalesce(sum(u.overage), 0)::integer from public.credit_uses u
  where u.account_id = p_account and u.feature = p_feature and u.overage > 0
    and u.state in ('consumed', 'reserved') and u.created_at >= p_since
$$;

-- The meter an account's overage of a feature is billed on (`credit_billing`), else null.
create or replace function public.credit_meter(p_account uuid, p_feature text) returns text
language sql
stable
set search_path = ''
as $$
  select b.meter from public.credit_billing(p_account, p_feature) b
$$;

-- The account whose credits of a feature a person consumes: their own when it holds some (or
-- is billed for overage), else the first team where they hold a seat that does, else their own.
create or replace function public.credit_account(p_user uuid, p_feature text) returns uuid
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce(
    (select a.id from public.access_accounts(p_user) as a(id)
      join public.accounts acc on acc.id = a.id
      where exists (select 1 from public.credit_live(a.id, p_feature))
        or public.credit_meter(a.id, p_feature) is not null
      order by acc.kind = 'personal' desc, a.id limit 1),
    (select a.id from public.accounts a where a.owner_id = p_user and a.kind = 'personal')
  )
$$;

-- What an account has of a feature now: balance, granted, used, when its period credits end.
create or replace function public.credit_balance(p_account uuid, p_feature text)
returns table (balance integer, granted integer, used integer, resets_at timestamptz)
language sql
stable
set search_path = ''
as $$
  select coalesce(sum(g.amount - g.used), 0)::integer, coalesce(sum(g.amount), 0)::integer,
    coalesce(sum(g.used), 0)::integer, min(g.expires_at) filter (where g.kind = 'period')
  from public.credit_live(p_account, p_feature) g
$$;

-- Take `p_amount` credits of `p_feature` from `p_account` under the idempotency key `p_key`:
-- `consumed` (or `reserved`, given back by `credits_release` or settled by `credits_settle`),
-- `refused` when the balance is short and no meter bills the overage, `conflict` when the key
-- was used for another account, feature or amount. The same key again answers what it answered
-- first (`first` false, with the first request's `answer` when one was kept) and takes nothing
-- more. The grants are locked in id order before the balance is read, so concurrent calls take
-- turns and the balance never goes below zero.
create or replace function public.credit_take(
  p_account uuid, p_feature text, p_amount integer, p_key text, p_state text
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_use public.credit_uses;
  v_grant record;
  v_left integer := p_amount;
  v_take integer;
  v_draws jsonb := '[]'::jsonb;
  v_balance integer := 0;
  v_granted integer := 0;
  v_period bigint;
  v_pack bigint;
  v_meter text;
  v_customer text;
  v_cap integer;
  v_since timestamptz;
  v_state text := p_state;
begin
  insert into public.credit_uses (key, account_id, feature, amount, state, balance, reserved)
  values (p_key, p_account, p_feature, p_amount, p_state, 0,
    case when p_state = 'reserved' then p_amount end)
  on conflict (key) do nothing
  returning * into v_use;
  if v_use.key is null then  -- taken before (or being taken: the insert waited for it)
    select * into v_use from public.credit_uses u where u.key = p_key;
    if v_use.account_id <> p_account or v_use.feature <> p_feature
      or coalesce(v_use.reserved, v_use.amount) <> p_amount
    then
      return jsonb_build_object('state', 'conflict', 'feature', p_feature);
    end if;
    return jsonb_build_object('state', v_use.state, 'feature', v_use.feature,
      'balance', v_use.balance, 'overage', v_use.overage, 'first', false,
      'answer', public.credit_answer(v_use), 'capped', v_use.capped);
  end if;
  for v_grant in
    select g.id, g.kind, g.amount, g.amount - g.used as left_over from public.credit_grants g
    where g.account_id = p_account and g.feature = p_feature and g.ended_at is null
      and (g.expires_at is null or g.expires_at > now())
    order by g.id for update
  loop
    v_balance := v_balance + v_grant.left_over;
    v_granted := v_granted + v_grant.amount;
    -- What a low balance is told once for: the current period (its oldest live grant), else
    -- the newest pack.
    if v_grant.kind = 'period' then
      v_period := coalesce(v_period, v_grant.id);
    else
      v_pack := v_grant.id;
    end if;
  end loop;
  if v_balance < p_amount then
    select b.meter, b.customer_id, b.cap, b.since into v_meter, v_customer, v_cap, v_since
    from public.credit_overage_terms(p_account, p_feature) b;
    if v_meter is null then
      update public.credit_uses set state = 'refused', balance = v_balance where key = p_key;
      return jsonb_build_object('state', 'refused', 'feature', p_feature,
        'balance', v_balance, 'overage', 0, 'first', true);
    end if;
    if v_cap is not null then
      -- The period's overage is summed under a lock of the account's feature, taken after the
      -- grants' (in every consumption's order), so parallel ones never pass the cap together,
      -- an account without credits of the feature (pay as you go) too.
      perform pg_advisory_xact_lock(hashtextextended(p_account::text || '/' || p_feature, 0));
      if public.credit_overage_used(p_account, p_feature, v_since) + p_amount - v_balance
        > v_cap
      then
        update public.credit_uses set state = 'refused', balance = v_balance, capped = true
        where key = p_key;
        return jsonb_build_object('state', 'refused', 'feature', p_feature,
          'balance', v_balance, 'overage', 0, 'first', true, 'capped', true);
      end if;
    end if;
  end if;
  -- Period credits first (they end soonest), then packs by expiry, oldest first.
  for v_grant in
    select g.id, g.amount - g.used as left_over from public.credit_live(p_account, p_feature) g
    where g.amount > g.used
    order by g.kind = 'period' desc, g.expires_at nulls last, g.id
  loop
    exit when v_left = 0;
    v_take := least(v_left, v_grant.left_over);
    update public.credit_grants set used = used + v_take where id = v_grant.id;
    v_draws := v_draws || jsonb_build_object('grant', v_grant.id, 'amount', v_take);
    v_left := v_left - v_take;
  end loop;
  v_balance := v_balance - (p_amount - v_left);
  update public.credit_uses set covered = p_amount - v_left, overage = v_left, draws = v_draws,
    balance = v_balance, meter = case when v_left > 0 then v_meter end,
    customer_id = case when v_left > 0 then v_customer end
  where key = p_key;
  return jsonb_build_object('state', v_state, 'feature', p_feature, 'balance', v_balance,
    'overage', v_left, 'first', true, 'granted', v_granted, 'before', v_balance + p_amount - v_left,
    'mark', coalesce(v_period, v_pack));
end
$$;

-- A person's consumption, the account found in the same statement (a key first taken by
-- someone else is a conflict): the one the key was first taken from by this person (the same
-- key answers the same even if the pool they draw from changed since: a seat lost, credits of
-- their own bought), else the pool they consume from now (`credit_account`); `unknown` for no
-- such person.
create or replace function public.credit_take_for(
  p_user uuid, p_feature text, p_amount integer, p_key text, p_state text
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_account uuid;
  v_taken jsonb;
begin
  select u.account_id into v_account from public.credit_uses u
  where u.key = p_key and u.user_id = p_user;
  if v_account is null then
    v_account := public.credit_account(p_user, p_feature);
  end if;
  if v_account is null then
    return jsonb_build_object('state', 'unknown', 'feature', p_feature);
  end if;
  v_taken := public.credit_take(v_account, p_feature, p_amount, p_key, p_state);
  update public.credit_uses u set user_id = p_user
  where u.key = p_key and u.user_id is null and (v_taken ->> 'first')::boolean;
  -- A key is its first taker's: another person (or the pool itself, taken by its id) sending it
  -- to the same pool is refused, never answered a consumption they did not make as their own.
  if not coalesce((v_taken ->> 'first')::boolean, true) and exists (
    select 1 from public.credit_uses u where u.key = p_key and u.user_id is distinct from p_user
  ) then
    return jsonb_build_object('state', 'conflict', 'feature', p_feature);
  end if;
  return v_taken || jsonb_build_object('account', v_account);
end
$$;

-- Supabase Edge Functions holding the secret key consume here; the API through `credit_take`.
create or replace function public.consume_credits(
  account uuid, feature text, amount integer, key text
) returns jsonb
language sql
security definer
set search_path = ''
as $$
  select public.credit_take(account, feature, amount, key, 'consumed')
$$;

-- The first request's answer kept with a consumption, for a request sent again with its key.
create or replace function public.credit_answer(p_use public.credit_uses) returns jsonb
language sql
immutable
set search_path = ''
as $$
  select case when p_use.answer_status is not null then jsonb_build_object(
    'status', p_use.answer_status, 'type', p_use.answer_type,
    'body', encode(coalesce(p_use.answer_body, ''::bytea), 'base64'),
    'request', p_use.answer_request) end
$$;

-- A reservation settled at what the work took (at most what was reserved; the rest given
-- back), or released whole (`p_amount` 0), with the answer its request gave (kept for a request
-- sent again with the key). Settling a key again changes nothing and answers the kept answer.
-- What the reservation drew from the grants (`covered`) is used first: only what the work took
-- beyond it is overage, and only what it did not take of it is given back.
create or replace function public.credits_settle_kept(
  p_key text, p_amount integer, p_status integer, p_type text, p_body bytea, p_request text
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_use public.credit_uses;
  v_back integer;
  v_draw jsonb;
  v_give integer;
begin
  select * into v_use from public.credit_uses u where u.key = p_key for update;
  if v_use.key is null then
    return jsonb_build_object('state', 'unknown');
  end if;
  if v_use.state <> 'reserved' then
    return jsonb_build_object('state', v_use.state, 'feature', v_use.feature,
      'balance', v_use.balance, 'first', false, 'answer', public.credit_answer(v_use));
  end if;
  if p_amount < 0 or p_amount > v_use.amount then
    return jsonb_build_object('state', 'conflict', 'feature', v_use.feature);
  end if;
  v_back := greatest(v_use.covered - p_amount, 0);
  -- Given back to the grants drawn last first, so a reservation's own draws are undone.
  for v_draw in select d from jsonb_array_elements(v_use.draws) with ordinality as x(d, n)
    order by n desc
  loop
    exit when v_back = 0;
    v_give := least(v_back, (v_draw ->> 'amount')::integer);
    update public.credit_grants set used = used - v_give where id = (v_draw ->> 'grant')::bigint;
    v_back := v_back - v_give;
  end loop;
  update public.credit_uses u set
    state = case when p_amount = 0 then 'released' else 'consumed' end,
    covered = least(u.covered, p_amount),
    overage = greatest(p_amount - u.covered, 0),
    amount = case when p_amount = 0 then u.amount else p_amount end,
    balance = (select b.balance from public.credit_balance(u.account_id, u.feature) b),
    settled_at = now(), answer_status = p_status, answer_type = p_type, answer_body = p_body,
    answer_request = p_request
  where u.key = p_key
  returning * into v_use;
  return jsonb_build_object('state', v_use.state, 'feature', v_use.feature,
    'balance', v_use.balance, 'overage', v_use.overage, 'first', true);
end
$$;

-- A reservation settled with no answer kept (a request sent again with its key is refused).
create or replace function public.credits_settle(p_key text, p_amount integer) returns jsonb
language sql
security definer
set search_path = ''
as $$
  select public.credits_settle_kept(p_key, p_amount, null, null, null, null)
$$;

-- The previous release's settling (its answers name no request): until it no longer runs.
create or replace function public.credits_settle_answered(
  p_key text, p_amount integer, p_status integer, p_type text, p_body bytea
) returns jsonb
language sql
security definer
set search_path = ''
as $$
  select public.credits_settle_kept(p_key, p_amount, p_status, p_type, p_body, null)
$$;

-- Reservations left unsettled longer than any request runs (`p_older_seconds`; their request's
-- instance died between the reservation and its settling) are released whole: their credits
-- come back, and their key answers 409 ("send a new key") instead of "still running" forever.
-- The keys released, for the log.
create or replace function public.credits_release_stale(p_older_seconds integer)
returns setof text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_key text;
begin
  for v_key in
    select u.key from public.credit_uses u
    where u.state = 'reserved' and u.created_at < now() - make_interval(secs => p_older_seconds)
    order by u.created_at limit 1000
  loop
    if (public.credits_settle(v_key, 0) ->> 'first')::boolean then
      return next v_key;
    end if;
  end loop;
end
$$;

-- The answer a request gave once its consumption was settled (a reservation settled within
-- the work, its route's answer known only after): kept once, for a request sent again.
create or replace function public.credits_keep_answer(
  p_key text, p_status integer, p_type text, p_body bytea, p_request text
) returns boolean
language sql
security definer
set search_path = ''
as $$
  with kept as (
    update public.credit_uses u set answer_status = p_status, answer_type = p_type,
      answer_body = p_body, answer_request = p_request
    where u.key = p_key and u.state in ('consumed', 'released') and u.answer_status is null
    returning 1
  )
  select exists (select 1 from kept)
$$;

-- The previous release's keeping of an answer (naming no request): until it no longer runs.
create or replace function public.credits_answered(
  p_key text, p_status integer, p_type text, p_body bytea
) returns boolean
language sql
security definer
set search_path = ''
as $$
  select public.credits_keep_answer(p_key, p_status, p_type, p_body, null)
$$;

-- Every feature's credits a person has, per account they have access through.
-- Each row also says what of the balance packs hold (`packs`: not ended with a period) and when
-- the first of them ends (`packs_expire_at`; null: kept until used), for a dashboard to say.
create or replace function public.credits_held(p_user uuid)
returns table (
  account_id uuid, team_id uuid, feature text, balance integer, granted integer,
  used integer, resets_at timestamptz, packs integer, packs_expire_at timestamptz
)
language sql
stable
security definer
set search_path = ''
as $$
  select a.id, case when acc.kind = 'team' then a.id end, f.feature, b.balance, b.granted,
    b.used, b.resets_at, p.packs, p.expire_at
  from public.access_accounts(p_user) as a(id)
  join public.accounts acc on acc.id = a.id
  cross join lateral (
    select distinct g.feature from public.credit_grants g
    where g.account_id = a.id and g.ended_at is null
      and (g.expires_at is null or g.expires_at > now())
  ) as f
  cross join lateral public.credit_balance(a.id, f.feature) as b
  cross join lateral (
    select coalesce(sum(g.amount - g.used), 0)::integer as packs,
      min(g.expires_at) filter (where g.amount > g.used) as expire_at
    from public.credit_live(a.id, f.feature) g where g.kind = 'once'
  ) as p
  order by f.feature, acc.kind = 'personal' desc, a.id
$$;

-- For row-level security: the signed-in user's balance of a feature (the pool they consume).
create or replace function public.credits_of(feature text) returns integer
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce((select b.balance from public.credit_balance(
    public.credit_account((select auth.uid()), feature), feature) b), 0)
$$;

-- Whether an account could take `p_amount` of `p_feature` now, taking nothing and writing
-- nothing: `allowed` as `credit_take` would decide it at this instant (the balance covers it, or
-- a meter Stripe will charge bills what goes beyond, within its cap), and how much of it would be
-- overage (none when refused). A consumption made later decides again under the grants' locks:
-- a check is an answer, not a hold.
create or replace function public.credit_check(p_account uuid, p_feature text, p_amount integer)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object('state', case when c.allowed then 'allowed' else 'refused' end,
    'feature', p_feature, 'balance', c.balance,
    'overage', greatest(p_amount - c.balance, 0) * c.allowed::integer)
  from (
    select b.balance, b.balance >= p_amount or (m.meter is not null and (m.cap is null
      or public.credit_overage_used(p_account, p_feature, m.since) + p_amount - b.balance
        <= m.cap)) as allowed
    from public.credit_balance(p_account, p_feature) b
    left join public.credit_overage_terms(p_account, p_feature) m on true
  ) c
$$;

-- A person's check, from the pool they would consume from now (`credit_account`); `unknown`
-- for no such person.
create or replace function public.credit_check_for(p_user uuid, p_feature text, p_amount integer)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select case when a.id is null then jsonb_build_object('state', 'unknown', 'feature', p_feature)
    else public.credit_check(a.id, p_feature, p_amount) || jsonb_build_object('account', a.id) end
  from (select public.credit_account(p_user, p_feature) as id) a
$$;

revoke execute on function
  public.credit_live(uuid, text),
  public.credit_billing(uuid, text),
  public.credit_overage_terms(uuid, text),
  public.credit_overage_used(uuid, text, timestamptz),
  public.credit_meter(uuid, text),
  public.credit_answer(public.credit_uses),
  public.credit_account(uuid, text),
  public.credit_balance(uuid, text),
  public.credit_take(uuid, text, integer, text, text),
  public.credit_take_for(uuid, text, integer, text, text),
  public.consume_credits(uuid, text, integer, text),
  public.credits_settle(text, integer),
  public.credits_settle_answered(text, integer, integer, text, bytea),
  public.credits_answered(text, integer, text, bytea),
  public.credits_settle_kept(text, integer, integer, text, bytea, text),
  public.credits_keep_answer(text, integer, text, bytea, text),
  public.credits_release_stale(integer),
  public.credits_held(uuid),
  public.credits_of(text),
  public.credit_check(uuid, text, integer),
  public.credit_check_for(uuid, text, integer)
  from public, anon, authenticated;

grant execute on function public.credits_of(text) to anon, authenticated;

grant execute on function
  public.credit_take(uuid, text, integer, text, text),
  public.credit_take_for(uuid, text, integer, text, text),
  public.consume_credits(uuid, text, integer, text),
  public.credits_settle(text, integer),
  public.credits_settle_answered(text, integer, integer, text, bytea),
  public.credits_answered(text, integer, text, bytea),
  public.credits_settle_kept(text, integer, integer, text, bytea, text),
  public.credits_keep_answer(text, integer, text, bytea, text),
  public.credits_release_stale(integer),
  public.credits_held(uuid),
  public.credit_account(uuid, text),
  public.credit_balance(uuid, text),
  public.credit_check(uuid, text, integer),
  public.credit_check_for(uuid, text, integer)
  to service_role;
