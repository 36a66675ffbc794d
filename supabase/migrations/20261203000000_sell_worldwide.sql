-- Selling worldwide: each price row keeps its currency and tax behaviour, and its product's
-- Stripe Tax code, so a pricing page says "incl. VAT" or "+ tax" in the right currency and a
-- checkout under Managed Payments is refused for a product Stripe could not tax. The catalogue
-- sync fills them from Stripe; until it runs after the deploy, a row's currency is unknown (null,
-- never a guess) and its tax behaviour unspecified, as Stripe's is until one is set.

alter table public.products
  add column currency text check (currency ~ '^[a-z]{3}$'),
  add column tax_behavior text not null default 'unspecified'
    check (tax_behavior in ('inclusive', 'exclusive', 'unspecified')),
  add column tax_code text;
