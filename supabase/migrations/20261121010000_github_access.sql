-- Repository access for `github` products: which GitHub account a purchase was delivered to.
alter table public.purchases
  add column github_username text,
  add column github_invited_at timestamptz;
