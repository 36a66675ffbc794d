-- What a person may use, as named features, asked in one place by the API, by Supabase Auth's
-- Custom Access Token Hook (the `has_access` and `features` claims) and by row-level security
-- (`has_feature`, `has_access`). Features are derived when read, from the active grants (written
-- by the access cycle's one write, so its ordering and applied-once guarantees hold here too)
-- and the features of the products sold at their prices (the catalogue's): a product whose
-- features change in the catalogue changes them for everyone holding it, with nothing to rewrite.
-- A repository product grants `github:<owner>/<repo>` (lowercase) besides its own features.

-- The accounts a person has access through: today their own. A team's seats are one more
-- `union` here, and every function below follows.
create or replace function public.access_accounts(p_user uuid) returns setof uuid
language sql
stable
security definer
set search_path = ''
as $$
  select a.id from public.accounts a where a.owner_id = p_user and a.kind = 'personal'
$$;

-- The sorted features the active grants of these accounts give (of the kinds named).
create or replace function public.grant_features(
  p_accounts uuid[],
  p_kinds text[] default array['subscription', 'purchase']
) returns text[]
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce(
    array_agg(distinct f.name collate "C" order by f.name collate "C"), '{}'::text[]
  )
  from public.entitlements e
  join public.products p on p.stripe_price_id = e.price_id
  cross join lateral unnest(
    p.features || case
      when p.type = 'github' and p.github_repo is not null
        then array['github:' || lower(p.github_repo)]
      else '{}'::text[]
    end
  ) as f(name)
  where e.account_id = any(p_accounts) and e.active and e.kind = any(p_kinds)
$$;

-- A person's features: those of every account they have access through.
create or replace function public.features_of(p_user uuid) returns text[]
language sql
stable
security definer
set search_path = ''
as $$
  select public.grant_features(array(select public.access_accounts(p_user)))
$$;

-- A person's access, as the access cycle mirrors it on their profile (what GET /api/me says).
create or replace function public.access_of(p_user uuid) returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce((select p.has_access from public.profiles p where p.id = p_user), false)
$$;

-- For row-level security: the signed-in user's. A name no product grants is simply not held.
create or replace function public.has_feature(name text) returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce(name = any(public.features_of((select auth.uid()))), false)
$$;

create or replace function public.has_access() returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select public.access_of((select auth.uid()))
$$;

-- Supabase Auth calls this (as supabase_auth_admin) before it issues an access token: every
-- claim it sends is kept, `has_access` and `features` are added (or replaced).
create or replace function public.custom_access_token_hook(event jsonb) returns jsonb
language plpgsql
stable
set search_path = ''
as $$
declare
  person uuid := (event ->> 'user_id')::uuid;
begin
  return jsonb_build_object(
    'claims',
    coalesce(event -> 'claims', '{}'::jsonb) || jsonb_build_object(
      'has_access', public.access_of(person),
      'features', to_jsonb(public.features_of(person))
    )
  );
end
$$;

-- Functions are executable by everyone unless taken back (and Supabase grants its API roles
-- every new function by default): a person's own questions are open to `authenticated`; asking
-- about anyone is for Supabase Auth's hook and the service alone.
revoke execute on function
  public.access_accounts(uuid),
  public.grant_features(uuid[], text[]),
  public.features_of(uuid),
  public.access_of(uuid),
  public.has_feature(text),
  public.has_access(),
  public.custom_access_token_hook(jsonb)
  from public, anon, authenticated;

-- anon too: a policy without `to authenticated` answers "not held" to a guest, not an error.
grant execute on function public.has_feature(text), public.has_access() to anon, authenticated;

grant usage on schema public to supabase_auth_admin;
grant execute on function
  public.custom_access_token_hook(jsonb),
  public.features_of(uuid),
  public.access_of(uuid)
  to supabase_auth_admin;

grant execute on function
  public.access_accounts(uuid),
  public.grant_features(uuid[], text[]),
  public.features_of(uuid),
  public.access_of(uuid)
  to service_role;
