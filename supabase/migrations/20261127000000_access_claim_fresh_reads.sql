-- access_claim read a customer's entitlements in the same statement that waited for the
-- profile's lock, so with that statement's snapshot: a grant another transaction inserted while
-- this one waited (the first change to a subscription) was not seen, and an older change then
-- overwrote it. Now the claim and the profile locks are one statement, and the entitlements and
-- the rest are read by the next ones, each with a snapshot taken after the locks were granted
-- (a plpgsql function in READ COMMITTED takes one per statement). Still one call, one round trip.
create or replace function public.access_claim(
  p_consumer text,
  p_ids text[],
  p_types text[],
  p_created timestamptz[],
  p_customers text[]
) returns jsonb
language plpgsql
volatile
set search_path = ''
as $$
declare
  claimed_ids text[];
  locked_profiles jsonb;
  found jsonb;
begin
  with incoming as (
    select * from unnest(p_ids, p_types, p_created, p_customers) as e(id, type, created, customer)
  ), claimed as (
    insert into public.processed_events (consumer, event_id, event_type, event_created, outcome)
    select p_consumer, d.id, d.type, d.created, 'pending'
    from (select distinct on (i.id) i.id, i.type, i.created from incoming i order by i.id) as d
    order by d.id
    on conflict do nothing
    returning event_id
  ), locked as (
    select p.id, p.email, p.name, p.customer_id, p.price_id, p.has_access, p.is_admin,
      p.access_changed_at, p.price_changed_at
    from public.profiles p
    where p.customer_id in (
      select i.customer from incoming i where i.id in (select c.event_id from claimed c))
    order by p.id
    for update
  )
  select
    coalesce((select array_agg(c.event_id) from claimed c), '{}'),
    coalesce((select jsonb_agg(to_jsonb(l)) from locked l), '[]')
  into claimed_ids, locked_profiles;

  with held as (
    select e.user_id, e.source_id, e.kind, e.price_id, e.status, e.active,
      e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,
      e.event_id
    from public.entitlements e
    where e.user_id in (
      select (l ->> 'id')::uuid from jsonb_array_elements(locked_profiles) as l)
    order by e.source_id
    for update
  ), known as (
    select p.id, p.email, p.name, p.customer_id, p.price_id, p.has_access, p.is_admin,
      p.access_changed_at, p.price_changed_at
    from public.profiles p
    where p.customer_id in (
      select i.customer from unnest(p_ids, p_customers) as i(id, customer)
      where i.id <> all(claimed_ids))
  )
  select jsonb_build_object(
    'claimed', to_jsonb(claimed_ids),
    'profiles', locked_profiles,
    'held', coalesce((select jsonb_agg(to_jsonb(h)) from held h), '[]'),
    'known', coalesce((select jsonb_agg(to_jsonb(k)) from known k), '[]'),
    'recorded', coalesce((
      select jsonb_object_agg(pe.event_id, pe.outcome) from public.processed_events pe
      where pe.consumer = p_consumer and pe.event_id = any(p_ids)
        and pe.event_id <> all(claimed_ids)), '{}')
  ) into found;
  return found;
end
$$;

revoke execute on function public.access_claim(text, text[], text[], timestamptz[], text[])
  from public, anon, authenticated;
