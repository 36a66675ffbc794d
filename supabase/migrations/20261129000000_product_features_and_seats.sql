-- What a product grants beyond access, and how it is sold: the catalogue fills both from Stripe
-- (a product's Entitlements features, else its `features` metadata; its `per_seat` metadata).
-- Features are lowercase slugs, so a policy or a route guard names them exactly.
alter table public.products
  add column features text[] not null default '{}'
    check (array_position(features, null) is null),
  add column per_seat boolean not null default false;
