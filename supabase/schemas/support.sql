-- The support API's own records (handlers/admin.py): what every admin call did, append-only,
-- and the e-mails an admin sent again.

-- One row per call of the support API, written before the call does anything (so nothing an
-- admin does goes unrecorded): who, what, about whom, why, when, and the request. Nobody
-- changes or removes a row: the API roles hold nothing on it, and a trigger refuses UPDATE,
-- DELETE and TRUNCATE to every role, service_role and the owner included.
create table public.admin_audit (
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
create index admin_audit_subject_idx on public.admin_audit (subject_user_id, id);

create or replace function public.admin_audit_refuse_change() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  raise exception 'public.admin_audit is append-only: % refused', tg_op
    using errcode = 'insufficient_privilege';
end
$$;
revoke execute on function public.admin_audit_refuse_change() from public, anon, authenticated;

create trigger admin_audit_append_only before update or delete on public.admin_audit
  for each row execute function public.admin_audit_refuse_change();
create trigger admin_audit_no_truncate before truncate on public.admin_audit
  for each statement execute function public.admin_audit_refuse_change();

-- Server only: no policy, nobody reads or writes it through the API; service_role may add
-- rows and read them, never change them (the trigger above holds even where a grant would not).
alter table public.admin_audit enable row level security;
revoke all on public.admin_audit from anon, authenticated;
revoke update, delete, truncate on public.admin_audit from service_role;

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
