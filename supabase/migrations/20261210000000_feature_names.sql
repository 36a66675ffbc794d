-- How a buyer reads each feature a product grants: the display name of its Stripe Entitlements
-- feature (key -> name), filled by the catalogue sync; a feature without one is shown by its key.
alter table public.products
  add column feature_names jsonb not null default '{}'::jsonb
    check (jsonb_typeof(feature_names) = 'object');
