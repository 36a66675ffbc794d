-- Repository access needs a paid, unrefunded purchase, and goes to one GitHub account per purchase.
-- `paid`: the access subscriber sets it from the checkout's payment status (and on
-- checkout.session.async_payment_succeeded). `refunded_at`: set when Stripe refunds the charge.
-- Rows recorded before this migration were written for every completed checkout, paid or not:
-- they start unpaid (README, "Security model", says how to confirm the genuine ones).
alter table public.purchases
  add column if not exists paid boolean not null default false,
  add column if not exists refunded_at timestamptz;

create table public.github_grants (
  id uuid primary key default gen_random_uuid(),
  purchase_id uuid not null unique references public.purchases (id) on delete cascade,
  user_id uuid not null references public.profiles (id) on delete cascade,
  github_username text not null,
  granted_at timestamptz not null default now()
);
create index github_grants_user_idx on public.github_grants (user_id);

-- The grants table replaces the delivery columns on purchases; what they recorded carries over.
insert into public.github_grants (purchase_id, user_id, github_username, granted_at)
select id, user_id, github_username, coalesce(github_invited_at, created_at)
from public.purchases
where github_username is not null and user_id is not null;

-- contract: nothing reads these columns since the release that wrote github_grants.
alter table public.purchases
  drop column github_username,
  drop column github_invited_at;

alter table public.github_grants enable row level security;

create policy "github_grants: own rows" on public.github_grants
  for select to authenticated
  using (user_id = (select auth.uid()));

grant select on public.github_grants to authenticated;
