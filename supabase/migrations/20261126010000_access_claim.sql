-- The access subscriber's first round trip as one function: claim a batch of events in the
-- ledger, lock the profiles of those claimed now and their entitlements, and read them, with
-- the outcomes of those claimed before and the profiles of their customers. A plpgsql function
-- keeps its plan per server connection (also behind a transaction pooler, which hands out the
-- same few), where the same statement sent from the client is planned on every call.
create or replace function public.access_claim(
  p_consumer text,
  p_ids text[],
  p_types text[],
  p_created timestamptz[],
  p_customers text[]
) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
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
  ), held as (
    select e.user_id, e.source_id, e.kind, e.price_id, e.status, e.active,
      e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,
      e.event_id
    from public.entitlements e
    where e.user_id in (select l.id from locked l)
    order by e.source_id
    for update
  ), known as (
    select p.id, p.email, p.name, p.customer_id, p.price_id, p.has_access, p.is_admin,
      p.access_changed_at, p.price_changed_at
    from public.profiles p
    where p.customer_id in (
      select i.customer from incoming i where i.id not in (select c.event_id from claimed c))
  )
  select jsonb_build_object(
    'claimed', coalesce((select jsonb_agg(c.event_id) from claimed c), '[]'),
    'profiles', coalesce((select jsonb_agg(to_jsonb(l)) from locked l), '[]'),
    'held', coalesce((select jsonb_agg(to_jsonb(h)) from held h), '[]'),
    'known', coalesce((select jsonb_agg(to_jsonb(k)) from known k), '[]'),
    'recorded', coalesce((
      select jsonb_object_agg(pe.event_id, pe.outcome) from public.processed_events pe
      where pe.consumer = p_consumer and pe.event_id = any(p_ids)), '{}')
  ) into found;
  return found;
end
$$;

-- Not an API: Supabase grants execute on new functions in `public` to its API roles.
revoke execute on function public.access_claim(text, text[], text[], timestamptz[], text[])
  from public, anon, authenticated;
