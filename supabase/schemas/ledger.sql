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

-- Server only: no policy, nobody reads it through the API.
alter table public.processed_events enable row level security;
