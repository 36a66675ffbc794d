-- The support API's own records (handlers/admin.py): what every admin call did, append-only,
-- and the e-mails an admin sent again.

-- One row per call of the support API, written before the call does anything (so nothing an
-- admin does goes unrecorded): who, what, about whom, why, when, and the request. Nobody
-- changes or removes a row, nor writes one of their own making:
-- - it lives in a schema of its own, `audit`, which belongs to `admin_audit_owner`, a role no
--   one logs in as and no runtime path uses, as do the table and its trigger's function: the
--   role that applies the schema and serves the app (Supabase's `postgres`) owns `public`, and
--   a schema's owner may drop anything in it; in `audit` it owns nothing and creates nothing,
--   so it cannot drop or rewrite the trigger, its function, the writer or the table, nor turn
--   the trigger off or alter the table;
-- - rows are added by `audit.admin_audit_record` alone, which runs as `admin_audit_writer`, a
--   role that may only insert the call's own columns: `id` and `at` are the database's
--   (`now()`);
-- - a trigger refuses UPDATE, DELETE and TRUNCATE to every role, the owner included;
-- - `service_role` uses the schema, reads the rows and calls `audit.admin_audit_record`,
--   nothing more (no INSERT, no TRIGGER, which would let a trigger of its own drop or rewrite
--   rows to come); `anon` and `authenticated` get nothing, and the Data API does not expose
--   `audit` (supabase/config.toml lists the schemas it serves).
-- Roles belong to the server, not the database: another database of it may have made them
-- already, or be making them at this moment.
do $$
declare
  v_role text;
begin
  foreach v_role in array array['admin_audit_owner', 'admin_audit_writer'] loop
    begin
      if not exists (select 1 from pg_roles where rolname = v_role) then
        execute format('create role %I nologin', v_role);
      end if;
    exception when duplicate_object or unique_violation then
      null;
    end;
  end loop;
end
$$;

-- The role applying the schema may act as the audit log's roles (a role's creator administers
-- it) and lets go at once, at the end.
grant admin_audit_owner, admin_audit_writer to current_user;

create schema audit authorization admin_audit_owner;
revoke all on schema audit from public, anon, authenticated;
-- The writer inserts into the table; service_role reads it and calls the writer.
grant usage on schema audit to admin_audit_writer, service_role;

create table audit.admin_audit (
  id bigint generated always as identity primary key,
  at timestamptz not null default now(),
  -- No foreign key: a row outlives the accounts it names (a key would rewrite or remove it).
  admin_id uuid not null,
  admin_email text,
  action text not null,
  subject_user_id uuid,
  subject text,
  reason text,
  request jsonb not null default '{}'::jsonb
);
create index admin_audit_subject_idx on audit.admin_audit (subject_user_id, id);

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

create trigger admin_audit_append_only before update or delete on audit.admin_audit
  for each row execute function audit.admin_audit_refuse_change();
create trigger admin_audit_no_truncate before truncate on audit.admin_audit
  for each statement execute function audit.admin_audit_refuse_change();

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

-- Server only: no policy for the API roles, nobody reads or writes it through the API;
-- service_role reads it (bypassing row-level security), the writer adds rows and sees their
-- ids (an INSERT's RETURNING reads the new row).
alter table audit.admin_audit enable row level security;
create policy "admin_audit: the writer adds rows" on audit.admin_audit
  for insert to admin_audit_writer
  with check (true);
create policy "admin_audit: the writer reads the ids it returns" on audit.admin_audit
  for select to admin_audit_writer
  using (true);
revoke all on audit.admin_audit from anon, authenticated, service_role;
grant select on audit.admin_audit to service_role;
revoke all on sequence audit.admin_audit_id_seq from anon, authenticated, service_role;
grant insert (admin_id, admin_email, action, subject_user_id, subject, reason, request)
  on audit.admin_audit to admin_audit_writer;
grant select (id) on audit.admin_audit to admin_audit_writer;

-- Handed to their roles last; a new owner needs CREATE on the schema only for the hand-over
-- (`admin_audit_owner` owns it already).
grant create on schema audit to admin_audit_writer;
alter table audit.admin_audit owner to admin_audit_owner;
alter function audit.admin_audit_refuse_change() owner to admin_audit_owner;
alter function audit.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  owner to admin_audit_writer;
revoke create on schema audit from admin_audit_writer;
revoke admin_audit_owner, admin_audit_writer from current_user;

-- An e-mail sent again by an admin, at most once per sent e-mail (event, kind): the second
-- request is refused (409), so a resend loop cannot flood a customer.
create table public.email_resends (
  event_id text not null,
  kind text not null,
  admin_id uuid not null,
  recipient text not null,
  provider_id text,
  resent_at timestamptz not null default now(),
  primary key (event_id, kind),
  foreign key (event_id, kind) references public.sent_emails (event_id, kind) on delete cascade
);

-- Server only: no policy, nobody reads it through the API.
alter table public.email_resends enable row level security;
