-- Seat changes are told from one place, and a team is locked in one order everywhere.
--
-- `public.team_refresh` is where seats are given out, whoever changed them (the API's routes,
-- or the access cycle applying Stripe's `customer.subscription.updated` from the billing
-- portal): it now records each member's change in `team_seat_changes`, and the server tells
-- the members (e-mail, repository access) from that record after the commit, keyed by the
-- change's id, so a redelivered or repeated telling sends nothing twice.
--
-- A per-seat product sold once (lifetime seats) limits a team's seats too: a purchase keeps its
-- line item's quantity, and `public.team_seats` is the one place a team's seats are counted.
--
-- Lock order: a team's account row, then its `teams` row, then personal accounts in id order.
-- The API takes it with `public.team_lock`; `public.access_claim` locks the team accounts of a
-- batch before the personal ones (and the teams' members' personal accounts with them), so a
-- team route and a Stripe batch touching one team wait for each other instead of deadlocking.

create table public.team_seat_changes (
  id bigint generated always as identity primary key,
  team_id uuid not null,
  user_id uuid not null,
  has_seat boolean not null,
  changed_at timestamptz not null default clock_timestamp(),
  -- Set once the member was told (or there was nothing true left to tell).
  told_at timestamptz,
  -- A member who leaves is not told about a seat of a team they are no longer in.
  foreign key (team_id, user_id) references public.team_members (team_id, user_id)
    on delete cascade
);
create index team_seat_changes_untold_idx on public.team_seat_changes (team_id)
  where told_at is null;

-- Server only: nobody reads it through the API.
alter table public.team_seat_changes enable row level security;
revoke all on public.team_seat_changes from anon, authenticated;

-- A seat's repository access taken away while its seat is lost, kept with its GitHub account
-- so that the seat given back gives the access back.
alter table public.team_github_grants add column removed_at timestamptz;

-- The quantity a checkout was bought with (its line item's): a per-seat price's seats.
alter table public.purchases add column quantity integer check (quantity > 0);

-- A team's seats: its active per-seat subscription's quantity plus the seats of its paid,
-- unrefunded per-seat one-time purchases; null (no limit) when it has neither.
create or replace function public.team_seats(p_team uuid) returns integer
language sql
stable
set search_path = ''
as $$
  with subscribed as (
    select coalesce(t.quantity, 1) as seats from public.teams t
    where t.id = p_team and exists (
      select 1 from public.entitlements e
      join public.products pr on pr.stripe_price_id = e.price_id
      where e.account_id = t.id and e.active and pr.per_seat and e.kind = 'subscription')
  ), bought as (
    select coalesce(pu.quantity, 1) as seats
    from public.purchases pu join public.products pr on pr.id = pu.product_id
    where pu.account_id = p_team and pu.paid and pu.refunded_at is null
      and pr.per_seat and pr.billing_type = 'one_time'
  ), sources as (
    select seats from subscribed union all select seats from bought
  )
  select case when exists (select 1 from sources) then (select sum(seats) from sources)::integer end
$$;

revoke execute on function public.team_seats(uuid) from public, anon, authenticated;

create or replace function public.team_lock(p_team uuid, p_users uuid[]) returns void
language plpgsql
volatile
set search_path = ''
as $$
begin
  perform 1 from public.accounts a where a.id = p_team for update;
  perform 1 from public.teams t where t.id = p_team for update;
  perform 1 from public.accounts a
  where a.kind = 'personal' and (a.owner_id = any(p_users) or a.owner_id in (
    select m.user_id from public.team_members m where m.team_id = p_team))
  order by a.id
  for update;
end
$$;

revoke execute on function public.team_lock(uuid, uuid[]) from public, anon, authenticated;

create or replace function public.team_refresh(p_team uuid) returns jsonb
language plpgsql
volatile
set search_path = ''
as $$
declare
  seats integer;
  changed jsonb;
begin
  -- One refresh of a team at a time (the API's changes hold this lock already).
  perform 1 from public.teams t where t.id = p_team for update;
  seats := public.team_seats(p_team);

  with ranked as (
    select m.user_id, m.has_seat, (seats is null or row_number() over (
      order by case m.role when 'owner' then 0 when 'admin' then 1 else 2 end,
        m.joined_at, m.user_id) <= seats) as seated
    from public.team_members m where m.team_id = p_team
  ), updated as (
    update public.team_members m set has_seat = r.seated
    from ranked r
    where m.team_id = p_team and m.user_id = r.user_id and m.has_seat <> r.seated
    returning m.user_id, m.has_seat
  ), recorded as (
    insert into public.team_seat_changes (team_id, user_id, has_seat)
    select p_team, u.user_id, u.has_seat from updated u
  )
  select jsonb_build_object(
    'lost', coalesce((select jsonb_agg(u.user_id) from updated u where not u.has_seat), '[]'),
    'regained', coalesce((select jsonb_agg(u.user_id) from updated u where u.has_seat), '[]'))
  into changed;

  perform public.access_refresh(
    array(select m.user_id from public.team_members m where m.team_id = p_team));
  return changed;
end
$$;

revoke execute on function public.team_refresh(uuid) from public, anon, authenticated;

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
    select k.event, a.id from keys k join public.accounts a on a.customer_id = k.customer
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
    where e.account_id = any(locked_ids)
    order by e.source_id
    for update
  ), accounts as (
    select a.id, a.kind, a.owner_id, p.email, p.name, a.customer_id, a.price_id, a.has_access,
      a.access_changed_at, a.price_changed_at, p.created_at
    from public.accounts a join public.profiles p on p.id = a.owner_id
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
      select jsonb_agg(to_jsonb(a) - 'created_at' order by a.created_at, a.id)
      from accounts a where a.id = any(locked_ids)), '[]'),
    'known', coalesce((
      select jsonb_agg(to_jsonb(a) - 'created_at' order by a.created_at, a.id)
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
