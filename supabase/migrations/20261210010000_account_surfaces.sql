-- The dashboard's account surfaces: the welcome mail after any first sign-in, and the credits a
-- dashboard shows with what packs hold of them.

-- The welcome mail goes once to every new person after their first sign-in, whatever its method
-- (a password sign-up never passes the API's sign-in callback): the profile records when it was
-- handed on.
alter table public.profiles add column welcomed_at timestamptz;

-- Those already welcomed (through the sign-in callback) are not welcomed again.
update public.profiles p set welcomed_at = s.sent_at
  from public.sent_emails s
  where s.event_id = 'signup_' || p.id::text and s.kind = 'new-signup';

-- A new return type: the function goes and comes back, with its grants, in this one transaction.
-- contract: the running release reads its rows by column name and finds every one it reads
drop function public.credits_held(uuid);
-- Each row also says what of the balance packs hold (`packs`: not ended with a period) and when
-- the first of them ends (`packs_expire_at`; null: kept until used), for a dashboard to say.
create or replace function public.credits_held(p_user uuid)
returns table (
  account_id uuid, team_id uuid, feature text, balance integer, granted integer,
  used integer, resets_at timestamptz, packs integer, packs_expire_at timestamptz
)
language sql
stable
security definer
set search_path = ''
as $$
  select a.id, case when acc.kind = 'team' then a.id end, f.feature, b.balance, b.granted,
    b.used, b.resets_at, p.packs, p.expire_at
  from public.access_accounts(p_user) as a(id)
  join public.accounts acc on acc.id = a.id
  cross join lateral (
    select distinct g.feature from public.credit_grants g
    where g.account_id = a.id and g.ended_at is null
      and (g.expires_at is null or g.expires_at > now())
  ) as f
  cross join lateral public.credit_balance(a.id, f.feature) as b
  cross join lateral (
    select coalesce(sum(g.amount - g.used), 0)::integer as packs,
      min(g.expires_at) filter (where g.amount > g.used) as expire_at
    from public.credit_live(a.id, f.feature) g where g.kind = 'once'
  ) as p
  order by f.feature, acc.kind = 'personal' desc, a.id
$$;
revoke execute on function public.credits_held(uuid) from public, anon, authenticated;
grant execute on function public.credits_held(uuid) to service_role;
