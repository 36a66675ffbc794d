-- Money links: a Stripe customer belongs to one account, and a team's rights follow its roles.
--
-- Stripe makes a new customer for every guest checkout that names none, so an account may have
-- several: `stripe_customers` records each once, with the account it belongs to, and nothing
-- ever moves it (an event only adds a customer never seen). Events of any of an account's
-- customers reach it. `accounts.customer_id` stays the billing customer (the one checkout and
-- the portal use); it must be one of the account's own customers (the foreign key below), and
-- only a checkout the account's own signed-in user (a team's owner or admin) made sets it: a
-- guest who types someone's e-mail address on Stripe's page may give them the product, never
-- take over their link (core/billing/decide.py).
--
-- A team's purchases, grants and billing mail belong to the team, not to whoever created it:
-- `accounts.owner_id` of a team is its creator, kept for the books, never a right. Row-level
-- security reads a team's rows through current membership only, a team purchase records its
-- buyer (not the creator), and the access cycle addresses a team's mail to a current owner.

create table public.stripe_customers (
  customer_id text primary key,
  account_id uuid not null references public.accounts (id) on delete cascade,
  created_at timestamptz not null default now(),
  unique (customer_id, account_id)
);
create index stripe_customers_account_idx on public.stripe_customers (account_id);

-- Server only: nobody reads it through the API.
alter table public.stripe_customers enable row level security;
revoke all on public.stripe_customers from anon, authenticated;

-- The links every account has today are its first customers.
insert into public.stripe_customers (customer_id, account_id)
select a.customer_id, a.id from public.accounts a where a.customer_id is not null
on conflict do nothing;

-- The billing customer is always one of the account's own (checked at the end of the
-- statement, so the access cycle's one write may record a customer and choose it together).
alter table public.accounts add constraint accounts_billing_customer_is_own
  foreign key (customer_id, id) references public.stripe_customers (customer_id, account_id);

-- A billing customer set by hand (an operator's SQL) is recorded as the account's when no
-- account has it yet; one that belongs to another account is refused by the key above.
create or replace function public.accounts_record_customer() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.customer_id is not null then
    insert into public.stripe_customers (customer_id, account_id)
    values (new.customer_id, new.id)
    on conflict do nothing;
  end if;
  return new;
end
$$;
revoke execute on function public.accounts_record_customer() from public, anon, authenticated;
create trigger accounts_record_customer before insert or update of customer_id on public.accounts
  for each row execute function public.accounts_record_customer();

-- Row-level security: a person reads their own personal account's rows; a team's rows only while
-- they are its member (the policies "members read their teams"). A team's creator is no
-- different from any other former member once they left.
drop policy "accounts: own ones or admin" on public.accounts;
create policy "accounts: own ones or admin" on public.accounts
  for select to authenticated
  using ((kind = 'personal' and owner_id = (select auth.uid())) or (select public.is_admin()));

drop policy "entitlements: own rows or admin" on public.entitlements;
create policy "entitlements: own rows or admin" on public.entitlements
  for select to authenticated
  using (
    account_id in (
      select a.id from public.accounts a
      where a.kind = 'personal' and a.owner_id = (select auth.uid()))
    or (select public.is_admin())
  );

-- `purchases.user_id` is who paid, for the books: the rows a person reads are their own
-- account's purchases and, while they are a member, their teams'.
drop policy "purchases: own rows" on public.purchases;
create policy "purchases: own rows" on public.purchases
  for select to authenticated
  using (
    account_id in (
      select a.id from public.accounts a
      where a.kind = 'personal' and a.owner_id = (select auth.uid()))
  );
create policy "purchases: members read their teams" on public.purchases
  for select to authenticated
  using ((select public.is_team_member(account_id)));

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
    where e.account_id = any(locked_ids)
    order by e.source_id
    for update
  ), accounts as (
    -- Who the account's billing mail speaks to: a personal account's person; a team's current
    -- owner who has held the role longest (never its creator once they left or were demoted).
    select a.id, a.kind, a.owner_id, p.email, p.name, a.customer_id, a.price_id, a.has_access,
      a.access_changed_at, a.price_changed_at, a.created_at,
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
