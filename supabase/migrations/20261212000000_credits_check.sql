-- A check before work: whether an account (or a person's pool) could take an amount of a
-- feature now, and whether any of it would be overage, taking nothing and writing nothing.

-- Whether an account could take `p_amount` of `p_feature` now, taking nothing and writing
-- nothing: `allowed` as `credit_take` would decide it at this instant (the balance covers it, or
-- a meter Stripe will charge bills what goes beyond), and whether any of it would be overage. A
-- consumption made later decides again under the grants' locks: a check is an answer, not a hold.
create or replace function public.credit_check(p_account uuid, p_feature text, p_amount integer)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object('state', case when b.balance >= p_amount or m.meter is not null
      then 'allowed' else 'refused' end,
    'feature', p_feature, 'balance', b.balance,
    'overage', greatest(p_amount - b.balance, 0) * (m.meter is not null)::integer)
  from public.credit_balance(p_account, p_feature) b
  left join public.credit_billing(p_account, p_feature) m on true
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
  public.credit_check(uuid, text, integer),
  public.credit_check_for(uuid, text, integer)
  from public, anon, authenticated;

grant execute on function
  public.credit_check(uuid, text, integer),
  public.credit_check_for(uuid, text, integer)
  to service_role;
