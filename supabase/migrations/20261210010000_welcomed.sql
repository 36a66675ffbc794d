-- The welcome mail goes once to every new person after their first sign-in, whatever its method
-- (a password sign-up never passes the API's sign-in callback): the profile records when it was
-- handed on.
alter table public.profiles add column welcomed_at timestamptz;

-- Those already welcomed (through the sign-in callback) are not welcomed again.
update public.profiles p set welcomed_at = s.sent_at
  from public.sent_emails s
  where s.event_id = 'signup_' || p.id::text and s.kind = 'new-signup';
