-- Columns and roles: what a role must not read is not granted to it, an admin is one only
-- with a second factor, and the audit log is written by one role that only inserts.
--
-- During the deploy, the revision still serving appends to the audit log with a plain INSERT,
-- which the role serving it no longer may: its admin calls fail (a failed audit write stops the
-- call, nothing changes unrecorded) until the new revision serves.

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

-- The catalogue: anyone reads it, never a product's download link.
revoke select on public.products from anon, authenticated;
-- Every column but the download link, which reaches a product's holders only, through the API
-- (`GET /api/me`): a query names its columns (`select=*` is refused).
grant select (
  id, name, description, price, stripe_price_id, type, billing_type, billing_interval,
  trial_days, is_active, is_featured, github_repo, created_at, updated_at, features, per_seat,
  stripe_product_id, synced_at, credits, credits_period, credits_expire_days, meter, currency,
  tax_behavior, tax_code
) on public.products to anon, authenticated;

-- A grant: its holder reads it, never a comp's admin and reason.
revoke select on public.entitlements from authenticated;
-- Every column but a comp's admin and reason (`granted_by`, `reason`): the support API's alone.
grant select (
  id, account_id, source_id, kind, price_id, status, active, current_period_end,
  cancel_at_period_end, trial_end, ended_at, changed_at, event_id, created_at, updated_at
) on public.entitlements to authenticated;

-- The audit log: its own owner and writer (support.sql says why).
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

-- The one way a row is added: the call's own columns, at the database's time; its id.
create or replace function public.admin_audit_record(
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
  insert into public.admin_audit
    (admin_id, admin_email, action, subject_user_id, subject, reason, request)
  values (p_admin_id, p_admin_email, p_action, p_subject_user_id, p_subject, p_reason,
    coalesce(p_request, '{}'::jsonb))
  returning id
$$;
revoke execute on function public.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  from public, anon, authenticated;
grant execute on function public.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  to service_role;

-- Server only: no policy for the API roles, nobody reads or writes it through the API;
-- service_role reads it (bypassing row-level security), the writer adds rows and sees their
-- ids (an INSERT's RETURNING reads the new row).
create policy "admin_audit: the writer adds rows" on public.admin_audit
  for insert to admin_audit_writer
  with check (true);
create policy "admin_audit: the writer reads the ids it returns" on public.admin_audit
  for select to admin_audit_writer
  using (true);
revoke all on public.admin_audit from anon, authenticated, service_role;
grant select on public.admin_audit to service_role;
revoke all on sequence public.admin_audit_id_seq from anon, authenticated, service_role;
grant insert (admin_id, admin_email, action, subject_user_id, subject, reason, request)
  on public.admin_audit to admin_audit_writer;
grant select (id) on public.admin_audit to admin_audit_writer;

-- Handed to their roles last. The role applying the schema may hand them over (a role's
-- creator administers it) and lets go at once; a new owner needs CREATE on the schema only for
-- the hand-over.
grant usage on schema public to admin_audit_owner, admin_audit_writer;
grant create on schema public to admin_audit_owner, admin_audit_writer;
grant admin_audit_owner, admin_audit_writer to current_user;
alter table public.admin_audit owner to admin_audit_owner;
alter function public.admin_audit_refuse_change() owner to admin_audit_owner;
alter function public.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)
  owner to admin_audit_writer;
revoke admin_audit_owner, admin_audit_writer from current_user;
revoke create on schema public from admin_audit_owner, admin_audit_writer;
