-- The rest of a customer's life: refunds, disputes, and which payment a purchase was paid with.
alter table public.purchases
  add column if not exists stripe_payment_intent_id text,
  add column if not exists amount_refunded bigint not null default 0,
  add column if not exists refunded_at timestamptz;
create index if not exists purchases_payment_intent_idx
  on public.purchases (stripe_payment_intent_id);

-- Disputes (chargebacks) as Stripe opened them: for the admin, who must answer them in Stripe.
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
alter table public.disputes enable row level security;
-- No policy: nobody reads disputes through the API.
