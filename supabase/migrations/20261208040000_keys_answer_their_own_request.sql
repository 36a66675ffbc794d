-- A consumption key's kept answer names the request it answered (a key sent again with another
-- request is refused, never given another request's answer), and reservations left unsettled
-- by a request that died are released by the scheduled sweep (`flask --app main credits report`).
-- A key first taken by one person is a conflict for another drawing on the same pool.
-- The previous release's functions stay, as wrappers naming no request, until it no longer runs.

alter table public.credit_uses add column answer_request text;

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

revoke execute on function
  public.credits_settle_kept(text, integer, integer, text, bytea, text),
  public.credits_keep_answer(text, integer, text, bytea, text),
  public.credits_release_stale(integer)
  from public, anon, authenticated;

grant execute on function
  public.credits_settle_kept(text, integer, integer, text, bytea, text),
  public.credits_keep_answer(text, integer, text, bytea, text),
  public.credits_release_stale(integer)
  to service_role;
