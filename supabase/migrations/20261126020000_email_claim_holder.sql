-- Which delivery holds an e-mail claim: the same delivery claiming again (its first attempt's
-- connection broke, and may or may not have committed) gets its own claim back instead of
-- waiting out the lease.
alter table public.email_claims add column if not exists holder text;
