-- The schema as it stands, in one file: profiles, the accounts that pay with their grants
-- (entitlements) and purchases, products, the ledger of applied events and the e-mail records,
-- with row-level security as Supabase serves it. Later changes come as files of their own (see
-- README.md here).

create or replace function public.touch_updated_at() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.updated_at := now();
  return new;
end
$$;

-- One row per auth user. customer_id, price_id and has_access (and the dates beside them) mirror
-- the person's own account; the access subscriber keeps them so.
create table public.profiles (
  id uuid primary key references auth.users (id) on delete cascade,
  email text,
  name text,
  customer_id text unique,
  price_id text,
  has_access boolean not null default false,
  is_admin boolean not null default false,
  -- Stripe `created` of the newest access change applied, for operators.
  access_changed_at timestamptz,
  access_event_id text,
  -- Stripe `created` of the newest plan change applied: an older one never sets the plan back.
  price_changed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index profiles_email_idx on public.profiles (lower(email));
create trigger profiles_touch before update on public.profiles
  for each row execute function public.touch_updated_at();

create table public.products (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  description text not null default '',
  price numeric(12, 2) not null check (price >= 0),
  stripe_price_id text not null unique check (stripe_price_id like 'price\_%'),
  type text not null check (type in ('github', 'link')),
  billing_type text not null check (billing_type in ('one_time', 'subscription')),
  billing_interval text check (billing_interval in ('month', 'year')),
  -- A free trial: checkout passes its length to Stripe.
  trial_days integer check (trial_days between 1 and 730),
  is_active boolean not null default true,
  is_featured boolean not null default false,
  github_repo text,
  download_url text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint products_interval_matches_billing check (
    (billing_type = 'one_time' and billing_interval is null)
    or (billing_type = 'subscription' and billing_interval is not null)
  ),
  constraint products_delivery check (
    (type = 'github' and github_repo is not null) or type = 'link'
  )
);
create trigger products_touch before update on public.products
  for each row execute function public.touch_updated_at();

-- Who pays: the Stripe customer, the plan, the grants and the purchases belong to an account.
-- Each person has their own (`personal`, made with the profile); a team that pays is an account
-- of kind `team` whose members would hold seats in a table of their own.
create table public.accounts (
  id uuid primary key default gen_random_uuid(),
  kind text not null default 'personal' check (kind in ('personal', 'team')),
  -- A personal account's person; a team's owner.
  owner_id uuid not null references public.profiles (id) on delete cascade,
  customer_id text unique,
  price_id text,
  has_access boolean not null default false,
  -- Stripe `created` of the newest access change applied, for operators.
  access_changed_at timestamptz,
  access_event_id text,
  -- Stripe `created` of the newest plan change applied: an older one never sets the plan back.
  price_changed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index accounts_personal_key on public.accounts (owner_id) where kind = 'personal';
create trigger accounts_touch before update on public.accounts
  for each row execute function public.touch_updated_at();

-- A completed checkout. `paid` comes from its payment status (and
-- checkout.session.async_payment_succeeded); `refunded_at` marks a full refund.
create table public.purchases (
  id uuid primary key default gen_random_uuid(),
  -- The buyer, and the account that paid.
  user_id uuid references public.profiles (id) on delete set null,
  account_id uuid references public.accounts (id) on delete set null,
  product_id uuid references public.products (id) on delete set null,
  stripe_checkout_session_id text not null unique,
  stripe_customer_id text,
  stripe_payment_intent_id text,
  customer_email text,
  amount_total bigint,
  currency text,
  paid boolean not null default false,
  amount_refunded bigint not null default 0,
  refunded_at timestamptz,
  created_at timestamptz not null default now()
);
create index purchases_user_idx on public.purchases (user_id);
create index purchases_payment_intent_idx on public.purchases (stripe_payment_intent_id);

-- The one GitHub account each repository purchase was delivered to.
create table public.github_grants (
  id uuid primary key default gen_random_uuid(),
  purchase_id uuid not null unique references public.purchases (id) on delete cascade,
  user_id uuid not null references public.profiles (id) on delete cascade,
  github_username text not null,
  granted_at timestamptz not null default now()
);
create index github_grants_user_idx on public.github_grants (user_id);

-- Access per grant: one row per subscription (source_id: its id) and per one-time purchase
-- (source_id: its checkout session). A subscription's end ends only its own row, a refund only
-- its purchase's; an account's has_access is derived from them.
create table public.entitlements (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null references public.accounts (id) on delete cascade,
  source_id text not null unique,
  kind text not null check (kind in ('subscription', 'purchase')),
  price_id text,
  -- Stripe's subscription status; `paid` or `refunded` for a purchase.
  status text not null,
  active boolean not null,
  current_period_end timestamptz,
  cancel_at_period_end boolean not null default false,
  trial_end timestamptz,
  ended_at timestamptz,
  -- Stripe `created` of the newest change applied to this row, so older events cannot undo it.
  changed_at timestamptz,
  event_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index entitlements_account_idx on public.entitlements (account_id);
create trigger entitlements_touch before update on public.entitlements
  for each row execute function public.touch_updated_at();

-- Disputes (chargebacks) as Stripe opened them: for the admin, who answers them in Stripe.
create table public.disputes (
  id text primary key,
  charge_id text,
  payment_intent_id text,
  amount bigint,
  currency text,
  reason text,
  status text,
  opened_at timestamptz not null,
  recorded_at timestamptz not null default now()
);

create table public.leads (
  id uuid primary key default gen_random_uuid(),
  email text not null,
  created_at timestamptz not null default now()
);
create unique index leads_email_key on public.leads (lower(email));

-- The ledger: one row per (consumer, event) applied, written in the transaction of the effect.
create table public.processed_events (
  consumer text not null,
  event_id text not null,
  event_type text not null,
  event_created timestamptz not null,
  outcome text not null,
  processed_at timestamptz not null default now(),
  primary key (consumer, event_id)
);

-- One row per (event, e-mail kind) sent; the Resend idempotency key covers a crash before it.
create table public.sent_emails (
  event_id text not null,
  kind text not null,
  recipient text not null,
  provider_id text,
  sent_at timestamptz not null default now(),
  primary key (event_id, kind)
);

-- An e-mail is claimed, sent with no transaction open, then recorded in sent_emails: a claim
-- without a sent_emails row is a send that may have happened; it is sent again with the same
-- idempotency key, which Resend answers with the first send. `holder`: the delivery holding it,
-- which gets its own claim back instead of waiting out the lease.
create table public.email_claims (
  event_id text not null,
  kind text not null,
  holder text,
  claimed_at timestamptz not null default now(),
  primary key (event_id, kind)
);

-- A new auth user gets a profile and their own account.
create or replace function public.handle_new_user() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  insert into public.profiles (id, email, name)
  values (
    new.id,
    new.email,
    coalesce(new.raw_user_meta_data ->> 'full_name', new.raw_user_meta_data ->> 'name')
  )
  on conflict (id) do nothing;
  insert into public.accounts (kind, owner_id)
  values ('personal', new.id)
  on conflict (owner_id) where kind = 'personal' do nothing;
  return new;
end
$$;

create trigger on_auth_user_created
  after insert on auth.users
  for each row execute function public.handle_new_user();

-- Security definer so the profiles policy can ask about admins without recursing into itself.
create or replace function public.is_admin() returns boolean
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce((select p.is_admin from public.profiles p where p.id = auth.uid()), false)
$$;

alter table public.profiles enable row level security;
alter table public.accounts enable row level security;
alter table public.products enable row level security;
alter table public.purchases enable row level security;
alter table public.github_grants enable row level security;
alter table public.entitlements enable row level security;
alter table public.disputes enable row level security;
alter table public.leads enable row level security;
alter table public.processed_events enable row level security;
alter table public.sent_emails enable row level security;
alter table public.email_claims enable row level security;

create policy "profiles: own row or admin" on public.profiles
  for select to authenticated
  using (id = (select auth.uid()) or (select public.is_admin()));

create policy "accounts: own ones or admin" on public.accounts
  for select to authenticated
  using (owner_id = (select auth.uid()) or (select public.is_admin()));

create policy "products: active ones for everyone" on public.products
  for select to anon, authenticated
  using (is_active);

create policy "products: all for admins" on public.products
  for select to authenticated
  using ((select public.is_admin()));

create policy "purchases: own rows" on public.purchases
  for select to authenticated
  using (user_id = (select auth.uid()));

create policy "github_grants: own rows" on public.github_grants
  for select to authenticated
  using (user_id = (select auth.uid()));

create policy "entitlements: own rows or admin" on public.entitlements
  for select to authenticated
  using (
    account_id in (select a.id from public.accounts a where a.owner_id = (select auth.uid()))
    or (select public.is_admin())
  );

-- disputes, leads, processed_events, sent_emails and email_claims have no policy: nobody
-- reads them through the API.

grant select on public.profiles, public.accounts, public.products, public.purchases, public.github_grants,
  public.entitlements to authenticated;
grant select on public.products to anon;
grant execute on function public.is_admin() to anon, authenticated;

-- The access cycle's first round trip as one function: claim a batch of events in the ledger,
-- lock the accounts those claimed now are about (by customer, by the buyer's id or e-mail
-- address, by a refunded purchase) and their grants, and read them, with the purchases the
-- refunds name, the outcomes of the events claimed before and their accounts as committed. A
-- plpgsql function keeps its plan per server connection (also behind a transaction pooler),
-- where the same statement sent from the client is planned on every call. The claim and the
-- locks are one statement; the rest is read by the next one, with a snapshot taken after the
-- locks were granted (a plpgsql function in READ COMMITTED takes one per statement): a grant
-- another transaction wrote while this one waited is seen.
-- p_keys: [{"event", "customer", "user", "email", "intent"}], what each event is about.
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
      as k(event text, customer text, "user" uuid, email text, intent text)
  ), matching as (
    select k.event, a.id from keys k join public.accounts a on a.customer_id = k.customer
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
  ), locked as (
    select a.id from public.accounts a
    where a.id in (
      select m.id from matching m where m.event in (select c.event_id from claimed c))
    order by a.id
    for update
  )
  select
    coalesce((select array_agg(c.event_id) from claimed c), '{}'),
    coalesce((select array_agg(l.id) from locked l), '{}'),
    coalesce((
      select array_agg(distinct m.id) from matching m
      where m.event not in (select c.event_id from claimed c)), '{}')
  into claimed_ids, locked_ids, known_ids;

  with held as (
    select e.account_id, e.source_id, e.kind, e.price_id, e.status, e.active,
      e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,
      e.event_id
    from public.entitlements e
    where e.account_id = any(locked_ids)
    order by e.source_id
    for update
  ), accounts as (
    select a.id, a.kind, a.owner_id, p.email, p.name, a.customer_id, a.price_id, a.has_access,
      a.access_changed_at, a.price_changed_at, p.created_at
    from public.accounts a join public.profiles p on p.id = a.owner_id
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
      select jsonb_agg(to_jsonb(a) - 'created_at' order by a.created_at, a.id)
      from accounts a where a.id = any(locked_ids)), '[]'),
    'known', coalesce((
      select jsonb_agg(to_jsonb(a) - 'created_at' order by a.created_at, a.id)
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

-- Not an API: Supabase grants execute on new functions in `public` to its API roles.
revoke execute on function public.access_claim(text, text[], text[], timestamptz[], jsonb)
  from public, anon, authenticated;
