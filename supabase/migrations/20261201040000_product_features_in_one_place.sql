-- The features a product grants are derived in one function, `public.product_features`: the
-- grants' features (`public.grant_features`, behind GET /api/me, the token hook and row-level
-- security) and the features a success page says a guest's purchase gives both read it.

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
  cross join lateral unnest(public.product_features(p)) as f(name)
  where e.account_id = any(p_accounts) and e.active and e.kind = any(p_kinds)
$$;
