-- People: one profile per Supabase Auth user, made with their own account when the user signs
-- up (accounts.sql). Admins read every profile.

-- One row per auth user. customer_id, price_id and has_access (and the dates beside them) mirror
-- the person's own account; the access subscriber keeps them so.
create table public.profiles (
  id uuid primary key references auth.users (id) on delete cascade,
  email text,
  name text,
  customer_id text unique,
  price_id text,
  has_access boolean not null default false,
  is_admin boolean not null default false,
  -- Stripe `created` of the newest access change applied, for operators.
  access_changed_at timestamptz,
  access_event_id text,
  -- Stripe `created` of the newest plan change applied: an older one never sets the plan back.
  price_changed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- When the welcome mail was handed on (after their first sign-in, whatever its method): once.
  welcomed_at timestamptz
);
create index profiles_email_idx on public.profiles (lower(email));
create trigger profiles_touch before update on public.profiles
  for each row execute function public.touch_updated_at();

-- Security definer so the profiles policy can ask about admins without recursing into itself.
-- An admin is one only with a second factor (the token's `aal` is `aal2`), as the support API
-- requires (handlers/admin.py); always, here: `ADMIN_MFA=off` relaxes the API in development
-- alone, and nothing local reads through these policies as an admin.
create or replace function public.is_admin() returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce((select p.is_admin from public.profiles p where p.id = auth.uid()), false)
    and coalesce(auth.jwt() ->> 'aal', '') = 'aal2'
$$;

alter table public.profiles enable row level security;

create policy "profiles: own row or admin" on public.profiles
  for select to authenticated
  using (id = (select auth.uid()) or (select public.is_admin()));

grant select on public.profiles to authenticated;
grant execute on function public.is_admin() to anon, authenticated;
