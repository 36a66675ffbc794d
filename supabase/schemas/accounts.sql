-- Who pays: the Stripe customer, the plan, the grants and the purchases belong to an account.
-- Each person has their own (`personal`, made with the profile); a team that pays is an account
-- of kind `team` whose members hold seats (teams.sql).
create table public.accounts (
  id uuid primary key default gen_random_uuid(),
  kind text not null default 'personal' check (kind in ('personal', 'team')),
  -- A personal account's person; a team's creator, for the books only, which passes to another
  -- member when they go (`profile_leaves_teams`, teams.sql): the cascade takes a team only with
  -- the last of its people.
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

-- Stripe makes a new customer for every guest checkout that names none, so an account may have
-- several: each is recorded once, with the account it belongs to, and nothing ever moves it (an
-- event only adds a customer never seen). Events of any of an account's customers reach it.
-- Server only: nobody reads it through the API.
create table public.stripe_customers (
  customer_id text primary key,
  account_id uuid not null references public.accounts (id) on delete cascade,
  created_at timestamptz not null default now(),
  unique (customer_id, account_id)
);
create index stripe_customers_account_idx on public.stripe_customers (account_id);

alter table public.stripe_customers enable row level security;
revoke all on public.stripe_customers from anon, authenticated;

-- `accounts.customer_id` is the billing customer (the one checkout and the portal use): always
-- one of the account's own (checked at the end of the statement, so the access cycle's one
-- write may record a customer and choose it together). Only a checkout the account's own
-- signed-in user (a team's owner or admin) made sets it: a guest who types someone's e-mail
-- address on Stripe's page may give them the product, never take over their link
-- (core/billing/decide.py).
alter table public.accounts add constraint accounts_billing_customer_is_own
  foreign key (customer_id, id) references public.stripe_customers (customer_id, account_id);

-- A billing customer set by hand (an operator's SQL) is recorded as the account's when no
-- account has it yet; one that belongs to another account is refused by the key above.
create or replace function public.accounts_record_customer() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.customer_id is not null then
    insert into public.stripe_customers (customer_id, account_id)
    values (new.customer_id, new.id)
    on conflict do nothing;
  end if;
  return new;
end
$$;
revoke execute on function public.accounts_record_customer() from public, anon, authenticated;
create trigger accounts_record_customer before insert or update of customer_id on public.accounts
  for each row execute function public.accounts_record_customer();

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

-- A person reads their own personal account; a team's account only while they are its member
-- ("accounts: members read their teams", teams.sql). `owner_id` of a team is its creator, kept
-- for the books, never a right.
create policy "accounts: own ones or admin" on public.accounts
  for select to authenticated
  using ((kind = 'personal' and owner_id = (select auth.uid())) or (select public.is_admin()));

grant select on public.accounts to authenticated;
