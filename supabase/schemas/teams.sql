-- Teams that pay: a team is an account of kind `team` with a name, members in three roles, and
-- invitations by e-mail. A member holds a seat while the team's seats reach them (owners, then
-- admins, then members in the order they joined); a member's access is their own account's or
-- that of a team where they hold a seat. `public.team_refresh` is the one place seats are given
-- out: the API's membership changes call it in their transaction, and the access cycle's writes
-- reach it through triggers on accounts (access.sql) and on `teams.quantity`. It records each
-- member's seat change in `team_seat_changes`, from which the server tells the members after
-- the commit.
--
-- Lock order: a team's account row, then its `teams` row, then personal accounts in id order.
-- The API takes it with `public.team_lock`; `public.access_claim` (access.sql) takes the same.

create table public.teams (
  id uuid primary key references public.accounts (id) on delete cascade,
  name text not null check (length(name) between 1 and 100),
  -- The subscription's quantity, written by the access cycle: the seats of a per-seat product.
  quantity integer check (quantity >= 0),
  created_at timestamptz not null default now(),
  -- When the quantity in place was set (Stripe's time): the access cycle writes a quantity only
  -- when its event is newer, as a plan change is ordered on its own.
  quantity_changed_at timestamptz,
  -- Who wrote the name (its creator), which a mail quoting it names: never the member the
  -- team's account passes to when they go; null once they are gone (the name is not quoted).
  named_by uuid references public.profiles (id) on delete set null
);

-- A team's name goes out in mails from the product's own sender: short plain text (the API's
-- rule, core/teams.py), at most 60 characters on a new team and on a name that changes. A
-- trigger rather than a check constraint: a longer name from before this rule stays, and writes
-- of a team's other columns (its seats, by the access cycle) go on, where a check would refuse
-- any update of such a row.
create or replace function public.team_name_bounded() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if length(new.name) > 60 then
    raise exception 'a team name is at most 60 characters (%)', length(new.name)
      using errcode = 'check_violation';
  end if;
  return new;
end
$$;

revoke all on function public.team_name_bounded() from public, anon, authenticated;

create trigger teams_name_bounded
  before insert or update of name on public.teams
  for each row execute function public.team_name_bounded();

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
  -- A seat's repository access taken away while its seat is lost, kept with its GitHub account
  -- so that the seat given back gives the access back.
  removed_at timestamptz,
  primary key (team_id, user_id, repository)
);

-- Each member's seat lost or given back, recorded by `team_refresh`. Server only.
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

-- Each invitation mail a team sends (a new invitation, or one resent), for the daily limits of
-- the team and of the person who sent it (across all their teams: a new team gives its creator
-- no new day): counted and written with the team and the sender's own account locked, so two
-- invitations at once, of one team or of one sender's several teams, cannot both take the last
-- one. Rows past the 24 hours are pruned as the team or the sender sends more. Server only.
create table public.team_invitation_mails (
  id bigint generated always as identity primary key,
  team_id uuid not null references public.teams (id) on delete cascade,
  sent_at timestamptz not null default now(),
  -- Who sent it (null: a mail from before the sender was counted).
  sent_by uuid references public.profiles (id) on delete cascade
);
create index team_invitation_mails_team_idx on public.team_invitation_mails (team_id, sent_at);
create index team_invitation_mails_sender_idx on public.team_invitation_mails (sent_by, sent_at);

-- A team outlives its creator by any path, and keeps an owner. Deleting a person's profile
-- (their auth user deleted from the Supabase dashboard, or by SQL, cascades to it) is refused
-- while they are the last owner of a team with other members, as DELETE /api/me refuses it
-- (an owner whose own deletion is under way counts as gone, as DELETE /api/me counts them);
-- a team they created names its longest-standing other member, owners first, as its account's
-- `owner_id` (the creator, for the books only), as DELETE /api/me does, where the column's
-- cascade would otherwise take the team, its members, grants and credits with them. A team of
-- which they are all goes with them, as it closes with DELETE /api/me. The teams are locked
-- first, in the order every writer of a team takes them.
create or replace function public.profile_leaves_teams() returns trigger
language plpgsql
set search_path = ''
as $$
declare
  held record;
begin
  perform 1 from public.accounts a
  where a.kind = 'team' and (a.owner_id = old.id
    or a.id in (select m.team_id from public.team_members m where m.user_id = old.id))
  order by a.id
  for update;
  select t.id, t.name into held
  from public.team_members m join public.teams t on t.id = m.team_id
  where m.user_id = old.id and m.role = 'owner'
    and not exists (select 1 from public.team_members o
      where o.team_id = m.team_id and o.role = 'owner' and o.user_id <> old.id
        and not exists (select 1 from public.account_deletions d
          where d.user_id = o.user_id and d.finished_at is null))
    and exists (select 1 from public.team_members o
      where o.team_id = m.team_id and o.user_id <> old.id)
  order by t.id
  limit 1;
  if found then
    raise exception 'user % is the last owner of the team ''%'' (%), which has other members',
      old.id, held.name, held.id
      using errcode = 'restrict_violation',
        hint = 'Make another member an owner, or remove the other members, before deleting'
          ' this user (or delete the account with DELETE /api/me, which says the same).';
  end if;
  update public.accounts a set owner_id = (
    select m.user_id from public.team_members m
    where m.team_id = a.id and m.user_id <> old.id
    order by case m.role when 'owner' then 0 when 'admin' then 1 else 2 end, m.joined_at,
      m.user_id
    limit 1)
  where a.kind = 'team' and a.owner_id = old.id and exists (
    select 1 from public.team_members m where m.team_id = a.id and m.user_id <> old.id);
  return old;
end
$$;

revoke execute on function public.profile_leaves_teams() from public, anon, authenticated;

create trigger profiles_leave_teams
  before delete on public.profiles
  for each row execute function public.profile_leaves_teams();

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
alter table public.team_seat_changes enable row level security;
alter table public.team_invitation_mails enable row level security;

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

create policy "purchases: members read their teams" on public.purchases
  for select to authenticated
  using ((select public.is_team_member(account_id)));

-- Reading is all the API roles get here (row-level security above decides which rows), and
-- never an invitation's token hash, nor the seat changes or the invitation mails.
revoke all on public.teams, public.team_members, public.team_invitations,
  public.team_github_grants, public.team_seat_changes, public.team_invitation_mails
  from anon, authenticated;
grant select on public.teams, public.team_members, public.team_github_grants to authenticated;
grant select (id, team_id, email, role, invited_by, expires_at, accepted_at, revoked_at,
  created_at) on public.team_invitations to authenticated;
grant execute on function public.is_team_member(uuid) to authenticated;

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

-- Give a team's seats (all of them when it sells none: `team_seats` is null) in the order
-- owners, admins, members, each by when they joined, record who lost and who got back a seat,
-- and mirror its members' access. Returns who lost and who regained a seat.
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
