-- A member's features follow their seats: the accounts a person has access through are their
-- own and those of the teams where they hold a seat (a team's id is its account's). Everything
-- that reads features (GET /api/me, the access token hook, has_feature) asks this one function.
create or replace function public.access_accounts(p_user uuid) returns setof uuid
language sql
stable
security definer
set search_path = ''
as $$
  select a.id from public.accounts a where a.owner_id = p_user and a.kind = 'personal'
  union
  select m.team_id from public.team_members m where m.user_id = p_user and m.has_seat
$$;
