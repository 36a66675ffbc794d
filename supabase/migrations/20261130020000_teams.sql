-- Teams that pay: a team is an account of kind `team` with a name, members in three roles, and
-- invitations by e-mail. A member holds a seat while the team's seats reach them (owners, then
-- admins, then members in the order they joined); a member's access is their own account's or
-- that of a team where they hold a seat. `public.team_refresh` is the one place seats are given
-- and the members' profile mirrors recomputed: the API's membership changes call it in their
-- transaction, and the access cycle's writes reach it through a trigger on accounts.

create table public.teams (
  id uuid primary key references public.accounts (id) on delete cascade,
  name text not null check (length(name) between 1 and 100),
  -- The subscription's quantity, written by the access cycle: the seats of a per-seat product.
  quantity integer check (quantity >= 0),
  created_at timestamptz not null default now()
);

create table public.team_members (
  team_id uuid not null references public.teams (id) on delete cascade,
  user_id uuid not null references public.profiles (id) on delete cascade,
  role text not null check (role in ('owner', 'admin', 'member')),
  joined_at timestamptz not null default clock_timestamp(),
  has_seat boolean not null default true,
  primary key (team_id, user_id)
);
create index team_members_user_idx on public.team_members (user_id);

-- An invitation's token is kept only as its SHA-256: a leaked table lets nobody join.
create table public.team_invitations (
  id uuid primary key default gen_random_uuid(),
  team_id uuid not null references public.teams (id) on delete cascade,
  email text not null,
  role text not null check (role in ('owner', 'admin', 'member')),
  token_hash text not null unique,
  invited_by uuid references public.profiles (id) on delete set null,
  expires_at timestamptz not null,
  accepted_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz not null default now()
);
create index team_invitations_team_idx on public.team_invitations (team_id);

-- A team's repository product gives each member with a seat access on their own GitHub account:
-- one account per member and repository, taken back when they leave or lose their seat.
create table public.team_github_grants (
  team_id uuid not null references public.teams (id) on delete cascade,
  user_id uuid not null references public.profiles (id) on delete cascade,
  repository text not null,
  github_username text not null,
  granted_at timestamptz not null default now(),
  primary key (team_id, user_id, repository)
);

-- Whether the user is a member of the team (security definer: the policies below ask it
-- without recursing into team_members' own policy).
create or replace function public.is_team_member(p_team uuid) returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select exists (
    select 1 from public.team_members m where m.team_id = p_team and m.user_id = auth.uid())
$$;

alter table public.teams enable row level security;
alter table public.team_members enable row level security;
alter table public.team_invitations enable row level security;
alter table public.team_github_grants enable row level security;

create policy "teams: members read" on public.teams
  for select to authenticated
  using ((select public.is_team_member(id)) or (select public.is_admin()));

create policy "team_members: members read their teams" on public.team_members
  for select to authenticated
  using ((select public.is_team_member(team_id)) or (select public.is_admin()));

-- The invitations' columns a member may read: never the token's hash.
create policy "team_invitations: members read their teams" on public.team_invitations
  for select to authenticated
  using ((select public.is_team_member(team_id)) or (select public.is_admin()));

create policy "team_github_grants: own rows" on public.team_github_grants
  for select to authenticated
  using (user_id = (select auth.uid()));

create policy "accounts: members read their teams" on public.accounts
  for select to authenticated
  using (kind = 'team' and (select public.is_team_member(id)));

create policy "entitlements: members read their teams" on public.entitlements
  for select to authenticated
  using ((select public.is_team_member(account_id)));

-- Supabase grants every API role all privileges on a new table; reading is all they get here
-- (row-level security above decides which rows), and never an invitation's token hash.
revoke all on public.teams, public.team_members, public.team_invitations,
  public.team_github_grants from anon, authenticated;
grant select on public.teams, public.team_members, public.team_github_grants to authenticated;
grant select (id, team_id, email, role, invited_by, expires_at, accepted_at, revoked_at,
  created_at) on public.team_invitations to authenticated;
grant execute on function public.is_team_member(uuid) to authenticated;

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

-- Give a team's seats (all of them when it sells no seats: no active per-seat grant) in the
-- order owners, admins, members, each by when they joined, and mirror its members' access.
-- Returns who lost and who regained a seat, for the e-mails that tell them.
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
  select case when exists (
    select 1 from public.entitlements e join public.products pr on pr.stripe_price_id = e.price_id
    where e.account_id = t.id and e.active and pr.per_seat and e.kind = 'subscription')
    then coalesce(t.quantity, 1) end
  into seats
  from public.teams t where t.id = p_team;

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

-- The access cycle writes accounts (and their grants) in one statement: once it has, a team's
-- seats and its members' mirrors follow, and a person's own mirror keeps a team's access.
create or replace function public.accounts_refresh() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.kind = 'team' then
    perform public.team_refresh(new.id) where exists (
      select 1 from public.teams t where t.id = new.id);
  else
    perform public.access_refresh(array[new.owner_id]);
  end if;
  return null;
end
$$;

create trigger accounts_refresh after update on public.accounts
  for each row execute function public.accounts_refresh();

create or replace function public.teams_refresh() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  perform public.team_refresh(new.id);
  return null;
end
$$;

create trigger teams_refresh after update of quantity on public.teams
  for each row when (old.quantity is distinct from new.quantity)
  execute function public.teams_refresh();

revoke execute on function public.access_refresh(uuid[]) from public, anon, authenticated;
revoke execute on function public.team_refresh(uuid) from public, anon, authenticated;

-- The access cycle's first round trip also finds a team's account by its id (a checkout bought
-- for a team names it in its metadata).
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
  ), locked as (
    select a.id from public.accounts a
    where a.id in (
      select m.id from matching m where m.event in (select c.event_id from claimed c))
    order by a.id
    for update
  )
  select
    coalesce((select array_agg(c.event_id) from claimed c), '{}'),
    coalesce((select array_agg(l.id) from locked l), '{}'),
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

-- Not an API: Supabase grants execute on new functions in `public` to its API roles.
revoke execute on function public.access_claim(text, text[], text[], timestamptz[], jsonb)
  from public, anon, authenticated;
