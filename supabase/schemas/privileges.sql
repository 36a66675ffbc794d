-- Least privilege for Supabase's API roles. Supabase's `postgres` role, which applies the schema,
-- has default privileges that hand `anon`, `authenticated` and `service_role` every privilege on
-- each table, sequence and function it creates in `public`; row-level security does not stop all
-- of them (TRUNCATE empties a table whatever its policies). Here what the role creates gives
-- `anon` and `authenticated` nothing (`service_role`, the server's secret key, keeps Supabase's
-- default), and no function is executable by PUBLIC: each file grants beside its table or
-- function exactly what a policy or a caller needs, and nothing on a server-only table.
--
-- This file comes first in `schema_paths`: default privileges apply to what is created after
-- them, so every later file's objects start with nothing for the API roles, as an object of a new
-- migration does since 20261201020000_least_privilege.sql. The allow-list that proves it, for
-- every table and function: tests/adapters/db/test_privileges.py.
alter default privileges in schema public revoke all on tables from anon, authenticated;
alter default privileges in schema public revoke all on sequences from anon, authenticated;
alter default privileges in schema public revoke all on functions from anon, authenticated;
-- EXECUTE for PUBLIC is Postgres's built-in default, which a per-schema default cannot take away
-- (per-schema defaults only add to the global ones): taken back for every function the role
-- creates, in any schema.
alter default privileges revoke execute on functions from public;
