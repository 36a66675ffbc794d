-- What a person may use, as named features, asked in one place by the API, by Supabase Auth's
-- Custom Access Token Hook (the `has_access` and `features` claims) and by row-level security
-- (`has_feature`, `has_access`). Features are derived when read, from the active grants (written
-- by the access cycle's one write, so its ordering and applied-once guarantees hold here too)
-- and the features of the products sold at their prices (the catalogue's): a product whose
-- features change in the catalogue changes them for everyone holding it, with nothing to rewrite.
-- A repository product grants `github:<owner>/<repo>` (lowercase) besides its own features.

-- The accounts a person has access through: their own and those of the teams where they hold a
-- seat (a team's id is its account's). Everything that reads features (GET /api/me, the access
-- token hook, has_feature) asks this one function.
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

-- The features one product grants: its catalogue slugs, and `github:<owner>/<repo>` (lowercase)
-- for a repository product. One place: what a holder's grants give and what a success page says
-- a purchase gives both read it.
create or replace function public.product_features(p public.products) returns text[]
language sql
stable
set search_path = ''
as $$
  select p.features || case
    when p.type = 'github' and p.github_repo is not null
      then array['github:' || lower(p.github_repo)]
    else '{}'::text[]
  end
$$;

revoke execute on function public.product_features(public.products) from public, anon, authenticated;

-- The sorted features the active grants of these accounts give (of the kinds named). A comp
-- counts until its `current_period_end` (null: for good), read against the clock, so it ends
-- on time with nothing to run.
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
  cross join lateral unnest(public.product_features(p)) as f(name)
  where e.account_id = any(p_accounts) and e.active and e.kind = any(p_kinds)
    and (e.kind <> 'comp' or e.current_period_end is null or e.current_period_end > now())
$$;

-- A person's features: those of every account they have access through, comps included.
create or replace function public.features_of(p_user uuid) returns text[]
language sql
stable
security definer
set search_path = ''
as $$
  select public.grant_features(
    array(select public.access_accounts(p_user)), array['subscription', 'purchase', 'comp'])
$$;

-- A person's access: what the access cycle mirrors on their profile from Stripe's grants, or a
-- comp of their own account still running (read against the clock, so it ends on time).
create or replace function public.access_of(p_user uuid) returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce((select p.has_access from public.profiles p where p.id = p_user), false)
    or exists (
      select 1 from public.entitlements e join public.accounts a on a.id = e.account_id
      where a.owner_id = p_user and a.kind = 'personal' and e.kind = 'comp' and e.active
        and (e.current_period_end is null or e.current_period_end > now()))
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

-- Functions are executable by everyone unless taken back (and Supabase grants its API roles
-- every new function by default): a person's own questions are open to `authenticated`; asking
-- about anyone is for Supabase Auth's hook (auth_hook.sql) and the service alone.
revoke execute on function
  public.access_accounts(uuid),
  public.grant_features(uuid[], text[]),
  public.features_of(uuid),
  public.access_of(uuid),
  public.has_feature(text),
  public.has_access()
  from public, anon, authenticated;

-- anon too: a policy without `to authenticated` answers "not held" to a guest, not an error.
grant execute on function public.has_feature(text), public.has_access() to anon, authenticated;

grant execute on function
  public.access_accounts(uuid),
  public.grant_features(uuid[], text[]),
  public.features_of(uuid),
  public.access_of(uuid)
  to service_role;
