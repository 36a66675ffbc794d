-- The access cycle's database side: its first round trip (`access_claim`), and the one place a
-- person's access is mirrored on their profile from their own account and their seated teams
-- (`access_refresh`), reached from the cycle's writes by a trigger on accounts.

-- These people's profiles mirror their access: their own account's, or a team's where they
-- hold a seat. Their own accounts are locked first (in id order, as the access cycle locks
-- them), and read again after: two transactions refreshing one person (a team's event and their
-- own checkout) take turns, and the second sees what the first committed.
create or replace function public.access_refresh(p_users uuid[]) returns void
language plpgsql
volatile
set search_path = ''
as $$
begin
  perform 1 from public.accounts a
  where a.owner_id = any(p_users) and a.kind = 'personal'
  order by a.id
  for update;

  with derived as (
    select p.id, coalesce((
      select a.has_access from public.accounts a
      where a.owner_id = p.id and a.kind = 'personal'), false) or exists (
      select 1 from public.team_members m join public.accounts t on t.id = m.team_id
      where m.user_id = p.id and m.has_seat and t.has_access) as has_access
    from public.profiles p where p.id = any(p_users)
  )
  update public.profiles p set has_access = d.has_access
  from derived d
  where p.id = d.id and p.has_access is distinct from d.has_access;
end
$$;

revoke execute on function public.access_refresh(uuid[]) from public, anon, authenticated;

-- The access cycle writes accounts (and their grants) in one statement: once it has, a team's
-- seats and its members' mirrors follow (teams.sql). A person's own account changed: the cycle
-- has mirrored it onto their profile in the same statement, so their access is derived again
-- only when it may come from elsewhere too (they are a member of a team) or when it changed. A
-- renewal that changes no one's access then costs no second pass over the profile.
create or replace function public.accounts_refresh() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.kind = 'team' then
    perform public.team_refresh(new.id) where exists (
      select 1 from public.teams t where t.id = new.id);
  elsif old.has_access is distinct from new.has_access or exists (
    select 1 from public.team_members m where m.user_id = new.owner_id) then
    perform public.access_refresh(array[new.owner_id]);
  end if;
  return null;
end
$$;

create trigger accounts_refresh after update on public.accounts
  for each row execute function public.accounts_refresh();

-- The access cycle's first round trip as one function: claim a batch of events in the ledger,
-- lock the accounts those claimed now are about (by any of an account's Stripe customers, by the
-- buyer's id or e-mail address, by a refunded purchase, by a team's account id that a checkout
-- names) and their grants, and read them, with their customers, the purchases the refunds name,
-- the outcomes of the events claimed before and their accounts as committed. A plpgsql function keeps its plan per server
-- connection (also behind a transaction pooler), where the same statement sent from the client
-- is planned on every call. The claim and the locks are one statement; the rest is read by the
-- next one, with a snapshot taken after the locks were granted (a plpgsql function in READ
-- COMMITTED takes one per statement): a grant another transaction wrote while this one waited
-- is seen. Team accounts are locked before personal ones, with the personal accounts of the
-- teams' members: the lock order of `public.team_lock` (teams.sql).
-- p_keys: [{"event", "customer", "user", "email", "intent", "account"}], what each event is
-- about.
create or replace function public.access_claim(
  p_consumer text,
  p_ids text[],
  p_types text[],
  p_created timestamptz[],
  p_keys jsonb
) returns jsonb
language plpgsql
volatile
set search_path = ''
as $$
declare
  claimed_ids text[];
  locked_ids uuid[];
  known_ids uuid[];
  found jsonb;
begin
  with incoming as (
    select * from unnest(p_ids, p_types, p_created) as e(id, type, created)
  ), claimed as (
    insert into public.processed_events (consumer, event_id, event_type, event_created, outcome)
    select p_consumer, d.id, d.type, d.created, 'pending'
    from (select distinct on (i.id) i.id, i.type, i.created from incoming i order by i.id) as d
    order by d.id
    on conflict do nothing
    returning event_id
  ), keys as (
    select * from jsonb_to_recordset(p_keys)
      as k(event text, customer text, "user" uuid, email text, intent text, account uuid)
  ), matching as (
    select k.event, c.account_id as id from keys k
      join public.stripe_customers c on c.customer_id = k.customer
    union
    select k.event, a.id from keys k
      join public.accounts a on a.kind = 'personal' and a.owner_id = k."user"
    union
    select k.event, a.id from keys k
      join public.profiles p on lower(p.email) = lower(k.email)
      join public.accounts a on a.kind = 'personal' and a.owner_id = p.id
    union
    select k.event, pu.account_id from keys k
      join public.purchases pu on pu.stripe_payment_intent_id = k.intent
    where pu.account_id is not null
    union
    select k.event, a.id from keys k join public.accounts a on a.id = k.account
  ), wanted as (
    select m.id from matching m where m.event in (select c.event_id from claimed c)
  ), locked as (
    -- Team accounts first, then personal ones, each in id order: the order public.team_lock
    -- takes for the API's team changes. The personal accounts of the wanted teams' members are
    -- locked here too (not read): the team's refresh, which the writes trigger, locks them.
    select a.id, exists (select 1 from wanted w where w.id = a.id) as read
    from public.accounts a
    where a.id in (select w.id from wanted w)
      or (a.kind = 'personal' and a.owner_id in (
        select tm.user_id from public.team_members tm
        where tm.team_id in (select w.id from wanted w)))
    order by a.kind <> 'team', a.id
    for update
  )
  select
    coalesce((select array_agg(c.event_id) from claimed c), '{}'),
    coalesce((select array_agg(l.id) from locked l where l.read), '{}'),
    coalesce((
      select array_agg(distinct m.id) from matching m
      where m.event not in (select c.event_id from claimed c)), '{}')
  into claimed_ids, locked_ids, known_ids;

  with held as (
    select e.account_id, e.source_id, e.kind, e.price_id, e.status, e.active,
      e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,
      e.event_id
    from public.entitlements e
    -- An admin's comps are not Stripe's: the cycle never decides on them (an account says
    -- only whether one runs, `comped`, so a mail never says access ended while it remains).
    where e.account_id = any(locked_ids) and e.kind <> 'comp'
    order by e.source_id
    for update
  ), accounts as (
    -- Who the account's billing mail speaks to: a personal account's person; a team's current
    -- owner who has held the role longest (never its creator once they left or were demoted).
    select a.id, a.kind, a.owner_id, p.email, p.name, a.customer_id, a.price_id, a.has_access,
      a.access_changed_at, a.price_changed_at, a.created_at,
      exists (
        select 1 from public.entitlements c where c.account_id = a.id and c.kind = 'comp'
          and c.active and (c.current_period_end is null or c.current_period_end > now())
      ) as comped,
      coalesce((
        select array_agg(c.customer_id order by c.customer_id) from public.stripe_customers c
        where c.account_id = a.id), '{}') as customers
    from public.accounts a
    left join public.profiles p on p.id = case when a.kind = 'personal' then a.owner_id else (
      select m.user_id from public.team_members m
      where m.team_id = a.id and m.role = 'owner'
      order by m.joined_at, m.user_id limit 1) end
    where a.id = any(locked_ids) or a.id = any(known_ids)
  ), purchases as (
    select pu.id, pu.stripe_checkout_session_id as session_id, pu.account_id,
      coalesce(pr.billing_type = 'one_time', true) as one_time,
      pr.github_repo as repository, gg.github_username, pu.stripe_payment_intent_id as intent,
      pu.created_at
    from public.purchases pu
    left join public.products pr on pr.id = pu.product_id
    left join public.github_grants gg on gg.purchase_id = pu.id
    where pu.stripe_payment_intent_id in (
      select k ->> 'intent' from jsonb_array_elements(p_keys) as k)
  )
  select jsonb_build_object(
    'claimed', to_jsonb(claimed_ids),
    'accounts', coalesce((
      select jsonb_agg(to_jsonb(a) order by a.created_at, a.id)
      from accounts a where a.id = any(locked_ids)), '[]'),
    'known', coalesce((
      select jsonb_agg(to_jsonb(a) order by a.created_at, a.id)
      from accounts a where a.id = any(known_ids)), '[]'),
    'held', coalesce((select jsonb_agg(to_jsonb(h)) from held h), '[]'),
    'purchases', coalesce((
      select jsonb_agg(to_jsonb(pu) - 'created_at' order by pu.created_at) from purchases pu),
      '[]'),
    'recorded', coalesce((
      select jsonb_object_agg(pe.event_id, pe.outcome) from public.processed_events pe
      where pe.consumer = p_consumer and pe.event_id = any(p_ids)
        and pe.event_id <> all(claimed_ids)), '{}')
  ) into found;
  return found;
end
$$;

revoke execute on function public.access_claim(text, text[], text[], timestamptz[], jsonb)
  from public, anon, authenticated;
