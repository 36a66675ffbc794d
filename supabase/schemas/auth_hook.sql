-- Supabase Auth's Custom Access Token Hook: the `has_access` and `features` claims of every
-- access token, from the functions of features.sql. Enabled in the Supabase dashboard
-- (docs/features.md); it runs as `supabase_auth_admin`, which may call it and nothing else here.

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

revoke execute on function public.custom_access_token_hook(jsonb) from public, anon, authenticated;

grant usage on schema public to supabase_auth_admin;
grant execute on function
  public.custom_access_token_hook(jsonb),
  public.features_of(uuid),
  public.access_of(uuid)
  to supabase_auth_admin;
