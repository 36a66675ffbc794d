-- A person's own account changed: the access cycle has mirrored it onto their profile in the
-- same statement, so their access is derived again only when it may come from elsewhere too
-- (they are a member of a team) or when it changed. A renewal that changes no one's access
-- then costs no second pass over the profile (about half of the cycle's write in Postgres).
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
