-- Shared by the tables that keep an `updated_at`: a trigger sets it on every update.

create or replace function public.touch_updated_at() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.updated_at := now();
  return new;
end
$$;
