"""Typed settings, read once from the environment (and `.env` under `make run`): the only
reader of the environment, and the bottom layer (it imports nothing of the project).

One module per concern, each with its fields, the checks that guard them, the values that
guard its secrets and what production requires of it; `settings.py` composes them into the one
`Settings` everything reads:

- environment.py: APP_ENV, which every group's checks consult
- serving.py: the target a process runs and how (PORT, FUNCTION_TARGET, gunicorn, Cloud Run)
- database.py: Postgres
- site.py: the frontend and browsers (SITE_URL, AUTH_CALLBACK_URL, CORS_ORIGINS, COOKIE_DOMAIN)
- supabase.py, stripe.py, github.py: each vendor's keys and options
- mail.py: Resend, the senders, the support inbox, the brand's name, the local outbox
- bus.py: the event bus (Pub/Sub or in-process)
- delivery.py: how subscriber targets receive events (push and its authentication, or pull)
- limits.py: request limits, trusted proxies, vendors' timeout
- checks.py: the errors and the production rule's shape every group shares
"""

from config.checks import MissingSetting, SettingsError, secret, unsafe_reason
from config.database import TLS_SSLMODES, database_url_problem
from config.serving import TARGETS
from config.settings import (
    GROUPS,
    PRODUCTION_OPTIONAL,
    PRODUCTION_REQUIRED,
    PRODUCTION_REQUIRED_BY_TARGET,
    PUBLIC_VALUES,
    Settings,
)
from config.site import cors_origin_list
from config.stripe import DEV_WEBHOOK_SECRET
from config.supabase import (
    DEV_JWT_SECRET,
    SUPABASE_LOCAL_JWT_SECRET,
    SUPABASE_LOCAL_KEYS,
    supabase_key_role,
)

__all__ = [
    "DEV_JWT_SECRET",
    "DEV_WEBHOOK_SECRET",
    "GROUPS",
    "PRODUCTION_OPTIONAL",
    "PRODUCTION_REQUIRED",
    "PRODUCTION_REQUIRED_BY_TARGET",
    "PUBLIC_VALUES",
    "SUPABASE_LOCAL_JWT_SECRET",
    "SUPABASE_LOCAL_KEYS",
    "TARGETS",
    "TLS_SSLMODES",
    "MissingSetting",
    "Settings",
    "SettingsError",
    "cors_origin_list",
    "database_url_problem",
    "secret",
    "supabase_key_role",
    "unsafe_reason",
]
