-- An owner whose account deletion is under way counts as gone when another owner's profile is
-- deleted by SQL (the Supabase dashboard), as DELETE /api/me counts them: of two owners leaving
-- at once by the two paths, the second is refused, and the team keeps an owner.
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
