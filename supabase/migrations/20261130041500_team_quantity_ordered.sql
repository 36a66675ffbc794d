-- A team's seats follow its subscription's newest quantity, ordered on their own (as a plan
-- change is): an older event naming a quantity, delivered after a newer change to the grant
-- that names none (an invoice), or after a newer quantity of another of the team's
-- subscriptions, must neither be lost nor win. The access cycle writes a quantity only when
-- its event is newer than the one that set the quantity in place.
alter table public.teams add column quantity_changed_at timestamptz;
