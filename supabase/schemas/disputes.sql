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

-- Server only: no policy, nobody reads them through the API.
alter table public.disputes enable row level security;
