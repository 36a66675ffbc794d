-- The audit log moves to a schema of its own, `audit`, owned by `admin_audit_owner`: the role
-- that applies the schema and serves the app (Supabase's `postgres`) owns `public`, and a
-- schema's owner may drop anything in it (the trigger's function with the trigger, the writer,
-- the table) without holding any role. It owns nothing in `audit` and may create nothing there.
-- The rows move with the table (ALTER ... SET SCHEMA keeps them, and the triggers, policies,
-- grants and identity with them). `audit` is not among the schemas the Data API exposes
-- (supabase/config.toml).
--
-- During the deploy, the revision still serving reads `public.admin_audit` and calls
-- `public.admin_audit_record`, which are gone: its admin calls fail (a failed audit write stops
-- the call, nothing changes unrecorded) until the new revision serves.

-- The role applying the schema may act as the audit log's roles (a role's creator administers
-- it) and lets go at once, below.
grant admin_audit_owner, admin_audit_writer to current_user;

create schema audit authorization admin_audit_owner;
revoke all on schema audit from public, anon, authenticated;
-- The writer inserts into the table; service_role reads it and calls the writer.
grant usage on schema audit to admin_audit_writer, service_role;

-- contract: the new revision reads audit.admin_audit; the old one's admin calls fail meanwhile
alter table public.admin_audit set schema audit;
-- contract: the trigger follows its function wherever it lives
alter function public.admin_audit_refuse_change() set schema audit;
create or replace function audit.admin_audit_refuse_change() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  raise exception 'audit.admin_audit is append-only: % refused', tg_op
    using errcode = 'insufficient_privilege';
end
$$;
-- Its triggers call it whoever fires them: no role calls it.
revoke execute on function audit.admin_audit_refuse_change()
  from public, anon, authenticated, service_role;

-- contract: the new revision calls audit.admin_audit_record; the old one's admin calls fail
alter function public.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  set schema audit;
-- The one way a row is added: the call's own columns, at the database's time; its id.
create or replace function audit.admin_audit_record(
  p_admin_id uuid,
  p_admin_email text,
  p_action text,
  p_subject_user_id uuid,
  p_subject text,
  p_reason text,
  p_request jsonb
) returns bigint
language sql
volatile
security definer
set search_path = ''
as $$
  insert into audit.admin_audit
    (admin_id, admin_email, action, subject_user_id, subject, reason, request)
  values (p_admin_id, p_admin_email, p_action, p_subject_user_id, p_subject, p_reason,
    coalesce(p_request, '{}'::jsonb))
  returning id
$$;
revoke execute on function audit.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  from public, anon, authenticated;
grant execute on function audit.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  to service_role;

-- Nothing of the audit log is left in `public`, so its roles need nothing there.
revoke admin_audit_owner, admin_audit_writer from current_user;
revoke usage on schema public from admin_audit_owner, admin_audit_writer;
