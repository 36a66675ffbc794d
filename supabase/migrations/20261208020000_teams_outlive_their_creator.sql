-- Each invitation mail counts for the person who sent it too: a new team gives its creator no
-- new day of invitations (the limit counts each sender across all their teams).
alter table public.team_invitation_mails
  add column sent_by uuid references public.profiles (id) on delete cascade;
create index team_invitation_mails_sender_idx on public.team_invitation_mails (sent_by, sent_at);

-- A team outlives its creator by any path, and keeps an owner. Deleting a person's profile
-- (their auth user deleted from the Supabase dashboard, or by SQL, cascades to it) is refused
-- while they are the last owner of a team with other members, as DELETE /api/me refuses it;
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
      where o.team_id = m.team_id and o.role = 'owner' and o.user_id <> old.id)
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
