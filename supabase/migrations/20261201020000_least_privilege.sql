-- Least privilege for Supabase's API roles. Supabase's `postgres` role, which runs the
-- migrations, has default privileges that hand `anon`, `authenticated` and `service_role` every
-- privilege on each table, sequence and function it creates in `public`. Row-level security
-- decides which rows a SELECT, INSERT, UPDATE or DELETE touches, but it does not stop TRUNCATE
-- (every row, in one statement), nor TRIGGER, REFERENCES or MAINTAIN (LOCK, VACUUM, ...). So
-- `anon` and `authenticated` now hold on a table only what one of their policies needs (a
-- permissive policy for that role and command, on a table with row-level security on) and
-- never TRUNCATE, TRIGGER, REFERENCES or MAINTAIN; nothing on a view or a sequence; and EXECUTE
-- only on the functions named below. `service_role` (the server's secret key, which bypasses
-- row-level security anyway) keeps what Supabase gives it.
-- The allow-list that proves it, for every table and function: tests/adapters/db/test_privileges.py.

-- Tables, views and sequences: take back every privilege of anon and authenticated that no
-- policy of theirs needs. Read from the catalog, so it covers every table in `public` (those
-- of the migrations before this one too), whatever its name.
do $$
declare
  held record;
begin
  for held in
    select format('%I.%I', n.nspname, c.relname) as relation,
      case when c.relkind = 'S' then 'sequence ' else '' end as kind,
      r.rolname, a.privilege_type
    from pg_class c
    join pg_namespace n on n.oid = c.relnamespace
    cross join lateral aclexplode(c.relacl) a
    join pg_roles r on r.oid = a.grantee
    where n.nspname = 'public'
      and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
      and r.rolname in ('anon', 'authenticated')
      -- The migrations' own: not an extension's, nor a platform role's.
      and pg_has_role(c.relowner, 'member')
      and not exists (select 1 from pg_depend d
        where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
      and not (
        c.relkind in ('r', 'p') and c.relrowsecurity
        and a.privilege_type in ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
        and exists (
          select 1 from pg_policy p
          where p.polrelid = c.oid and p.polpermissive
            and (r.oid = any(p.polroles) or 0::oid = any(p.polroles))
            and p.polcmd in ('*', case a.privilege_type
              when 'SELECT' then 'r' when 'INSERT' then 'a' when 'UPDATE' then 'w' else 'd' end)
        )
      )
  loop
    execute format('revoke %s on %s%s from %I',
      held.privilege_type, held.kind, held.relation, held.rolname);
  end loop;
end
$$;

-- What each table's policies need, stated (these were held through the default privileges,
-- which from now on give nothing): the reads row-level security filters. Every other table is
-- the server's alone. team_invitations keeps its column grants (never the token's hash).
grant select on public.profiles, public.accounts, public.purchases, public.github_grants,
  public.entitlements, public.teams, public.team_members, public.team_github_grants
  to authenticated;
grant select on public.products to anon, authenticated;

-- Functions: executable by everyone (PUBLIC) unless taken back, and by Supabase's API roles
-- through its default privileges. Take it back from all of them, on every function in
-- `public`, then give it where intended. Trigger functions need no EXECUTE to fire.
do $$
declare
  fn regprocedure;
begin
  for fn in
    select p.oid::regprocedure
    from pg_proc p
    where p.pronamespace = 'public'::regnamespace
      and pg_has_role(p.proowner, 'member')
      and not exists (select 1 from pg_depend d
        where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
  loop
    execute format('revoke execute on function %s from public, anon, authenticated', fn);
  end loop;
end
$$;

-- Policies ask these; anon too for has_feature and has_access, so a founder's policy without
-- `to authenticated` answers "not held" to a guest instead of an error.
grant execute on function public.is_admin(), public.has_feature(text), public.has_access()
  to anon, authenticated;
grant execute on function public.is_team_member(uuid) to authenticated;
-- Supabase Auth's Custom Access Token Hook (supabase_auth_admin) and the service keep the
-- grants their migrations gave them.

-- What the migrations' role creates from now on gives anon and authenticated nothing: a new
-- table, sequence or function grants what it needs in its own migration (docs/database.md).
-- On Supabase this is allowed: a role may change its own default privileges, and the objects
-- a migration creates are `postgres`'s, whose defaults these are (Supabase's knowledge base,
-- "Can't change the default privileges of supabase_admin in the public schema": supabase_admin's
-- own defaults cannot be changed by `postgres`, and apply only to what supabase_admin creates).
alter default privileges in schema public revoke all on tables from anon, authenticated;
alter default privileges in schema public revoke all on sequences from anon, authenticated;
alter default privileges in schema public revoke all on functions from anon, authenticated;
-- EXECUTE for PUBLIC is Postgres's built-in default, which a per-schema default cannot take
-- away (per-schema defaults only add to the global ones): it is taken back for every function
-- the migrations' role creates, in any schema.
alter default privileges revoke execute on functions from public;
