-- The catalogue is read from Stripe (`flask --app main products sync`, and product and price
-- events): each row remembers its Stripe product, so a product's change reaches all its prices,
-- and the Stripe time of the state it holds, so an older event arriving late never overwrites a
-- newer state.
alter table public.products
  add column stripe_product_id text,
  add column synced_at timestamptz;
create index products_stripe_product_id on public.products (stripe_product_id);
