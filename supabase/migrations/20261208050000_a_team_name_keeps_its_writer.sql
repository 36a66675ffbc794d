-- Who wrote a team's name (its creator), which a mail quoting it names: never the member the
-- team's account passes to when they go; null once they are gone (the name is not quoted).
-- A team whose account already passed on is not told from one made by its owner: its writer is
-- taken to be its account's owner, as the mails named them until now.
alter table public.teams
  add column named_by uuid references public.profiles (id) on delete set null;
update public.teams t set named_by = a.owner_id from public.accounts a where a.id = t.id;
