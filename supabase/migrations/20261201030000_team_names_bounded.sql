-- A team's name goes out in mails from the product's own sender: it is short plain text (the
-- API's rule, core/teams.py), and a team sends a bounded number of invitation mails a day.
--
-- The name's length is held here too, as a backstop: at most 60 characters, on a new team and
-- on a name that changes. A trigger rather than a check constraint: a name longer than 60 from
-- before this rule stays, and writes of a team's other columns (its seats, by the access
-- cycle) go on, where a check would refuse any update of such a row.

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

create trigger teams_name_bounded
  before insert or update of name on public.teams
  for each row execute function public.team_name_bounded();

-- Each invitation mail a team sends (a new invitation, or one resent), for its daily limit:
-- counted and written with the team locked, so two invitations at once cannot both take the
-- last one. Rows past the 24 hours are pruned as the team sends more.
create table public.team_invitation_mails (
  id bigint generated always as identity primary key,
  team_id uuid not null references public.teams (id) on delete cascade,
  sent_at timestamptz not null default now()
);
create index team_invitation_mails_team_idx on public.team_invitation_mails (team_id, sent_at);

-- Server only: nobody reads it through the API.
alter table public.team_invitation_mails enable row level security;
revoke all on public.team_invitation_mails from anon, authenticated;
revoke all on function public.team_name_bounded() from public, anon, authenticated;
