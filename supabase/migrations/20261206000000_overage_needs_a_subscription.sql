-- Overage is billed only on an active subscription: a complimentary grant (kind `comp`) of a
-- product that names a meter gives its credits' feature, but Stripe has no subscription to
-- bill its overage on, so consumption beyond the credits is refused (402) instead.
create or replace function public.credit_meter(p_account uuid, p_feature text) returns text
language sql
stable
set search_path = ''
as $$
  select p.meter from public.entitlements e
  join public.products p on p.stripe_price_id = e.price_id
  where e.account_id = p_account and e.active and e.kind = 'subscription'
    and p.meter is not null and (p.credits ? p_feature or p_feature = any(p.features))
  order by p.meter limit 1
$$;
