-- A plan change is ordered against the last plan change, not against the last access change
-- of any kind: a subscription update older than a renewal applied first still sets the plan.
alter table public.profiles add column if not exists price_changed_at timestamptz;
-- Until now the plan was written with access: its last change is at most that recent.
update public.profiles set price_changed_at = access_changed_at
  where price_id is not null and price_changed_at is null;
