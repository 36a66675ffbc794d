-- Who pays: the Stripe customer, the plan, the grants and the purchases belong to an account.
-- Each person has their own (`personal`, made with the profile); a team that pays is an account
-- of kind `team` whose members hold seats (teams.sql).
create table public.accounts (
  id uuid primary key default gen_random_uuid(),
  kind text not null default 'personal' check (kind in ('personal', 'team')),
  -- A personal account's person; a team's owner.
  owner_id uuid not null references public.profiles (id) on delete cascade,
  customer_id text unique,
  price_id text,
  has_access boolean not null default false,
  -- Stripe `created` of the newest access change applied, for operators.
  access_changed_at timestamptz,
  access_event_id text,
  -- Stripe `created` of the newest plan change applied: an older one never sets the plan back.
  price_changed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index accounts_personal_key on public.accounts (owner_id) where kind = 'personal';
create trigger accounts_touch before update on public.accounts
  for each row execute function public.touch_updated_at();

-- A new auth user gets a profile and their own account.
create or replace function public.handle_new_user() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  insert into public.profiles (id, email, name)
  values (
    new.id,
    new.email,
    coalesce(new.raw_user_meta_data ->> 'full_name', new.raw_user_meta_data ->> 'name')
  )
  on conflict (id) do nothing;
  insert into public.accounts (kind, owner_id)
  values ('personal', new.id)
  on conflict (owner_id) where kind = 'personal' do nothing;
  return new;
end
$$;

create trigger on_auth_user_created
  after insert on auth.users
  for each row execute function public.handle_new_user();

alter table public.accounts enable row level security;

create policy "accounts: own ones or admin" on public.accounts
  for select to authenticated
  using (owner_id = (select auth.uid()) or (select public.is_admin()));

grant select on public.accounts to authenticated;
