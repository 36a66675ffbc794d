-- The support API: an append-only audit of every admin call, e-mails an admin sent again, and
-- complimentary grants (kind `comp`) beside Stripe's, counted by every reader of access (the
-- features, the token hook, row-level security, GET /api/me) until their end, and never
-- decided on by the access cycle, which keeps to Stripe's grants (it reads only whether one runs,
-- so a mail saying a subscription's access ended says the rest remains).

alter table public.entitlements drop constraint entitlements_kind_check;
alter table public.entitlements add constraint entitlements_kind_check
  check (kind in ('subscription', 'purchase', 'comp'));
-- A comp's cause: the admin who gave it and why (the audit log has the call itself).
alter table public.entitlements add column granted_by uuid;
alter table public.entitlements add column reason text;

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

-- The access cycle's first round trip as one function: claim a batch of events in the ledger,
-- lock the accounts those claimed now are about (by any of an account's Stripe customers, by the
-- buyer's id or e-mail address, by a refunded purchase, by a team's account id that a checkout
-- names) and their grants, and read them, with their customers, the purchases the refunds name,
-- the outcomes of the events claimed before and their accounts as committed. A plpgsql function keeps its plan per server
-- connection (also behind a transaction pooler), where the same statement sent from the client
-- is planned on every call. The claim and the locks are one statement; the rest is read by the
-- next one, with a snapshot taken after the locks were granted (a plpgsql function in READ
-- COMMITTED takes one per statement): a grant another transaction wrote while this one waited
-- is seen. Team accounts are locked before personal ones, with the personal accounts of the
-- teams' members: the lock order of `public.team_lock` (teams.sql).
-- p_keys: [{"event", "customer", "user", "email", "intent", "account"}], what each event is
-- about.
create or replace function public.access_claim(
  p_consumer text,
  p_ids text[],
  p_types text[],
  p_created timestamptz[],
  p_keys jsonb
) returns jsonb
language plpgsql
volatile
set search_path = ''
as $$
declare
  claimed_ids text[];
  locked_ids uuid[];
  known_ids uuid[];
  found jsonb;
begin
  with incoming as (
    select * from unnest(p_ids, p_types, p_created) as e(id, type, created)
  ), claimed as (
    insert into public.processed_events (consumer, event_id, event_type, event_created, outcome)
    select p_consumer, d.id, d.type, d.created, 'pending'
    from (select distinct on (i.id) i.id, i.type, i.created from incoming i order by i.id) as d
    order by d.id
    on conflict do nothing
    returning event_id
  ), keys as (
    select * from jsonb_to_recordset(p_keys)
      as k(event text, customer text, "user" uuid, email text, intent text, account uuid)
  ), matching as (
    select k.event, c.account_id as id from keys k
      join public.stripe_customers c on c.customer_id = k.customer
    union
    select k.event, a.id from keys k
      join public.accounts a on a.kind = 'personal' and a.owner_id = k."user"
    union
    select k.event, a.id from keys k
      join public.profiles p on lower(p.email) = lower(k.email)
      join public.accounts a on a.kind = 'personal' and a.owner_id = p.id
    union
    select k.event, pu.account_id from keys k
      join public.purchases pu on pu.stripe_payment_intent_id = k.intent
    where pu.account_id is not null
    union
    select k.event, a.id from keys k join public.accounts a on a.id = k.account
  ), wanted as (
    select m.id from matching m where m.event in (select c.event_id from claimed c)
  ), locked as (
    -- Team accounts first, then personal ones, each in id order: the order public.team_lock
    -- takes for the API's team changes. The personal accounts of the wanted teams' members are
    -- locked here too (not read): the team's refresh, which the writes trigger, locks them.
    select a.id, exists (select 1 from wanted w where w.id = a.id) as read
    from public.accounts a
    where a.id in (select w.id from wanted w)
      or (a.kind = 'personal' and a.owner_id in (
        select tm.user_id from public.team_members tm
        where tm.team_id in (select w.id from wanted w)))
    order by a.kind <> 'team', a.id
    for update
  )
  select
    coalesce((select array_agg(c.event_id) from claimed c), '{}'),
    coalesce((select array_agg(l.id) from locked l where l.read), '{}'),
    coalesce((
      select array_agg(distinct m.id) from matching m
      where m.event not in (select c.event_id from claimed c)), '{}')
  into claimed_ids, locked_ids, known_ids;

  with held as (
    select e.account_id, e.source_id, e.kind, e.price_id, e.status, e.active,
      e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,
      e.event_id
    from public.entitlements e
    -- An admin's comps are not Stripe's: the cycle never decides on them (an account says
    -- only whether one runs, `comped`, so a mail never says access ended while it remains).
    where e.account_id = any(locked_ids) and e.kind <> 'comp'
    order by e.source_id
    for update
  ), accounts as (
    -- Who the account's billing mail speaks to: a personal account's person; a team's current
    -- owner who has held the role longest (never its creator once they left or were demoted).
    select a.id, a.kind, a.owner_id, p.email, p.name, a.customer_id, a.price_id, a.has_access,
      a.access_changed_at, a.price_changed_at, a.created_at,
      exists (
        select 1 from public.entitlements c where c.account_id = a.id and c.kind = 'comp'
          and c.active and (c.current_period_end is null or c.current_period_end > now())
      ) as comped,
      coalesce((
        select array_agg(c.customer_id order by c.customer_id) from public.stripe_customers c
        where c.account_id = a.id), '{}') as customers
    from public.accounts a
    left join public.profiles p on p.id = case when a.kind = 'personal' then a.owner_id else (
      select m.user_id from public.team_members m
      where m.team_id = a.id and m.role = 'owner'
      order by m.joined_at, m.user_id limit 1) end
    where a.id = any(locked_ids) or a.id = any(known_ids)
  ), purchases as (
    select pu.id, pu.stripe_checkout_session_id as session_id, pu.account_id,
      coalesce(pr.billing_type = 'one_time', true) as one_time,
      pr.github_repo as repository, gg.github_username, pu.stripe_payment_intent_id as intent,
      pu.created_at
    from public.purchases pu
    left join public.products pr on pr.id = pu.product_id
    left join public.github_grants gg on gg.purchase_id = pu.id
    where pu.stripe_payment_intent_id in (
      select k ->> 'intent' from jsonb_array_elements(p_keys) as k)
  )
  select jsonb_build_object(
    'claimed', to_jsonb(claimed_ids),
    'accounts', coalesce((
      select jsonb_agg(to_jsonb(a) order by a.created_at, a.id)
      from accounts a where a.id = any(locked_ids)), '[]'),
    'known', coalesce((
      select jsonb_agg(to_jsonb(a) order by a.created_at, a.id)
      from accounts a where a.id = any(known_ids)), '[]'),
    'held', coalesce((select jsonb_agg(to_jsonb(h)) from held h), '[]'),
    'purchases', coalesce((
      select jsonb_agg(to_jsonb(pu) - 'created_at' order by pu.created_at) from purchases pu),
      '[]'),
    'recorded', coalesce((
      select jsonb_object_agg(pe.event_id, pe.outcome) from public.processed_events pe
      where pe.consumer = p_consumer and pe.event_id = any(p_ids)
        and pe.event_id <> all(claimed_ids)), '{}')
  ) into found;
  return found;
end
$$;

revoke execute on function public.access_claim(text, text[], text[], timestamptz[], jsonb)
  from public, anon, authenticated;


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
