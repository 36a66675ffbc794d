-- A cap on what overage may cost: a metered product's `overage_cap` (units per billing period);
-- past it a consumption is refused (`capped`), its key answering the same again, and a check
-- says so before.

alter table public.products
  add column overage_cap integer check (overage_cap between 1 and 1000000000);

alter table public.credit_uses add column capped boolean not null default false;

-- The overage of a period, summed against its cap.
create index credit_uses_overage on public.credit_uses (account_id, feature, created_at)
  where overage > 0;

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

create or replace function public.credit_billing(p_account uuid, p_feature text)
returns table (meter text, customer_id text)
language sql
stable
set search_path = ''
as $$
  select t.meter, t.customer_id from public.credit_overage_terms(p_account, p_feature) t
$$;

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

revoke execute on function
  public.credit_overage_terms(uuid, text),
  public.credit_overage_used(uuid, text, timestamptz)
  from public, anon, authenticated;
