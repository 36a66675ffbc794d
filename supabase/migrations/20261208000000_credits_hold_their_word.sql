-- Credits hold their word: a key's first answer is kept and given again (the work behind a key
-- runs once), overage is billed on the customer of the subscription that carries the meter and
-- only while Stripe will charge it (active, or a trial a payment method backs), and settling a
-- reservation that went into overage keeps what it used.

-- Who pays each grant, and whether a payment method backs a subscription (the access cycle
-- keeps them from Stripe's events).
alter table public.entitlements add column customer_id text;
alter table public.entitlements add column payment_method boolean;
-- An account with one Stripe customer pays every grant with it; one with several is told
-- which by its subscription's next event (until then its overage is refused, never misbilled).
update public.entitlements e set customer_id = (
  select min(c.customer_id) from public.stripe_customers c where c.account_id = e.account_id)
where e.kind <> 'comp' and (
  select count(*) from public.stripe_customers c where c.account_id = e.account_id) = 1;

alter table public.credit_uses add column answer_status integer;
alter table public.credit_uses add column answer_type text;
alter table public.credit_uses add column answer_body bytea;
alter table public.credit_uses add column reserved integer;


-- Who pays an account's consumption beyond its credits of a feature: the meter and the Stripe
-- customer of the subscription carrying it (a subscription to a product that names a meter and
-- grants the feature, as credits or as a feature). The rule: only a subscription Stripe will
-- charge bills overage: `active` (paid), or on trial with a payment method behind it (a trial
-- without one is cancelled at its end, and nobody pays; a trial's paid invoice of nothing says
-- `active`, so its `trial_end` says it is one). A complimentary grant, a past-due or ended
-- subscription, one whose customer is not known: none, so the consumption is refused.
create or replace function public.credit_billing(p_account uuid, p_feature text)
returns table (meter text, customer_id text)
language sql
stable
set search_path = ''
as $$
  select p.meter, e.customer_id from public.entitlements e
  join public.products p on p.stripe_price_id = e.price_id
  where e.account_id = p_account and e.active and e.kind = 'subscription'
    and e.customer_id is not null
    and e.status in ('active', 'trialing')
    and (e.payment_method or (e.status = 'active' and coalesce(e.trial_end <= now(), true)))
    and p.meter is not null and (p.credits ? p_feature or p_feature = any(p.features))
  order by p.meter, e.source_id limit 1
$$;

-- The meter an account's overage of a feature is billed on (`credit_billing`), else null.
create or replace function public.credit_meter(p_account uuid, p_feature text) returns text
language sql
stable
set search_path = ''
as $$
  select b.meter from public.credit_billing(p_account, p_feature) b
$$;

-- The first request's answer kept with a consumption, for a request sent again with its key.
create or replace function public.credit_answer(p_use public.credit_uses) returns jsonb
language sql
immutable
set search_path = ''
as $$
  select case when p_use.answer_status is not null then jsonb_build_object(
    'status', p_use.answer_status, 'type', p_use.answer_type,
    'body', encode(coalesce(p_use.answer_body, ''::bytea), 'base64')) end
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
      'answer', public.credit_answer(v_use));
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
    select b.meter, b.customer_id into v_meter, v_customer
    from public.credit_billing(p_account, p_feature) b;
    if v_meter is null then
      update public.credit_uses set state = 'refused', balance = v_balance where key = p_key;
      return jsonb_build_object('state', 'refused', 'feature', p_feature,
        'balance', v_balance, 'overage', 0, 'first', true);
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

-- A reservation settled at what the work took (at most what was reserved; the rest given
-- back), or released whole (`p_amount` 0), with the answer its request gave (kept for a request
-- sent again with the key). Settling a key again changes nothing and answers the kept answer.
-- What the reservation drew from the grants (`covered`) is used first: only what the work took
-- beyond it is overage, and only what it did not take of it is given back.
create or replace function public.credits_settle_answered(
  p_key text, p_amount integer, p_status integer, p_type text, p_body bytea
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
    settled_at = now(), answer_status = p_status, answer_type = p_type, answer_body = p_body
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
  select public.credits_settle_answered(p_key, p_amount, null, null, null)
$$;

-- The answer a request gave once its consumption was settled (a reservation settled within
-- the work, its route's answer known only after): kept once, for a request sent again.
create or replace function public.credits_answered(
  p_key text, p_status integer, p_type text, p_body bytea
) returns boolean
language sql
security definer
set search_path = ''
as $$
  with kept as (
    update public.credit_uses u set answer_status = p_status, answer_type = p_type,
      answer_body = p_body
    where u.key = p_key and u.state in ('consumed', 'released') and u.answer_status is null
    returning 1
  )
  select exists (select 1 from kept)
$$;

revoke execute on function
  public.credit_billing(uuid, text),
  public.credit_answer(public.credit_uses),
  public.credits_settle_answered(text, integer, integer, text, bytea),
  public.credits_answered(text, integer, text, bytea)
  from public, anon, authenticated;

grant execute on function
  public.credits_settle_answered(text, integer, integer, text, bytea),
  public.credits_answered(text, integer, text, bytea)
  to service_role;
