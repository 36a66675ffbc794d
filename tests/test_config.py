"""Settings: local defaults, and production's refusal to start without its secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
import stripe
from pydantic_settings import BaseSettings

from config import (
    DEV_JWT_SECRET,
    DEV_WEBHOOK_SECRET,
    GROUPS,
    PRODUCTION_OPTIONAL,
    PRODUCTION_REQUIRED,
    PRODUCTION_REQUIRED_BY_TARGET,
    SUPABASE_LOCAL_JWT_SECRET,
    Settings,
    SettingsError,
)
from core.stripe_objects import CURRENT_VERSION
from tests.test_env_example import ENV_EXAMPLE

PRODUCTION = {
    "APP_ENV": "production",
    "EVENT_BUS": "pubsub",
    "DATABASE_URL": "postgresql://u:p@db.example.com:6543/postgres?sslmode=require",
    "SITE_URL": "https://shop.acme.dev",
    "SUPABASE_URL": "https://proj.supabase.co",
    "SUPABASE_PUBLISHABLE_KEY": "anon",
    "SUPABASE_SECRET_KEY": "service",
    "STRIPE_SECRET_KEY": "sk_live_x",
    "STRIPE_PUBLISHABLE_KEY": "pk_live_x",
    "STRIPE_WEBHOOK_SECRET": "whsec_live",
    "RESEND_API_KEY": "re_live",
    # What cloudbuild.yaml gives the subscriber targets (the api ignores them).
    "PUSH_AUDIENCE": "https://saas-access-123456789012.europe-west1.run.app",
    "PUSH_SERVICE_ACCOUNT": "saas-push@my-project.iam.gserviceaccount.com",
}


def test_local_defaults() -> None:
    s = Settings()
    assert (s.app_env, s.port, s.auth_callback_url, s.event_bus) == (
        "development",
        8080,
        "/dashboard",
        "inline",
    )
    assert (s.google_cloud_project, s.pubsub_topic, s.stripe_api_version) == (
        "local-project",
        "payment-events",
        CURRENT_VERSION,
    )
    assert stripe.api_version == CURRENT_VERSION, "the SDK pins the version the service reads"
    assert s.webhook_secret == DEV_WEBHOOK_SECRET
    assert s.test_email_enabled is True
    assert str(s.email_outbox_dir) == ".data/outbox"


def test_production_starts_with_every_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in PRODUCTION.items():
        monkeypatch.setenv(name, value)
    s = Settings()
    assert s.is_production
    assert s.test_email_enabled is False
    assert s.webhook_secret == "whsec_live"


@pytest.mark.parametrize(
    ("target", "missing"),
    [
        (target, name.upper())
        for target, names in PRODUCTION_REQUIRED_BY_TARGET.items()
        for name in names
    ],
)
def test_production_names_each_missing_secret_of_its_target(
    monkeypatch: pytest.MonkeyPatch, target: str, missing: str
) -> None:
    for name, value in {**PRODUCTION, "FUNCTION_TARGET": target}.items():
        if name != missing:
            monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"missing: {missing}"):
        Settings()


@pytest.mark.parametrize(
    ("target", "unneeded"),
    [
        ("api", "RESEND_API_KEY"),
        ("api", "SUPABASE_SECRET_KEY"),
        ("emails", "STRIPE_SECRET_KEY"),
    ],
)
def test_a_target_starts_without_the_secrets_it_does_not_read(
    monkeypatch: pytest.MonkeyPatch, target: str, unneeded: str
) -> None:
    for name, value in {**PRODUCTION, "FUNCTION_TARGET": target}.items():
        if name != unneeded:
            monkeypatch.setenv(name, value)
    assert Settings().function_target == target


@pytest.mark.parametrize("target", ["access", "emails"])
@pytest.mark.parametrize("value", [None, "", " "])
def test_a_production_push_target_needs_its_push_audience_and_account(
    monkeypatch: pytest.MonkeyPatch, target: str, value: str | None
) -> None:
    for name, setting in {**PRODUCTION, "FUNCTION_TARGET": target}.items():
        if not name.startswith("PUSH_"):
            monkeypatch.setenv(name, setting)
        elif value is not None:
            monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        Settings()
    assert refused.value.problems == (
        "missing: PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT (APP_ENV=production: the"
        f" {target} push target checks Pub/Sub's push token)",
    )


def test_push_settings_are_not_needed_by_the_api_nor_a_pull_subscriber(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in PRODUCTION.items():
        if not name.startswith("PUSH_"):
            monkeypatch.setenv(name, value)
    assert Settings().function_target == "api"
    monkeypatch.setenv("FUNCTION_TARGET", "access")
    monkeypatch.setenv("SUBSCRIBER_DELIVERY", "pull")
    assert Settings().subscriber_delivery == "pull"


def test_the_api_needs_resend_when_its_test_route_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**PRODUCTION, "ENABLE_TEST_EMAIL": "true"}.items():
        if name != "RESEND_API_KEY":
            monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match="missing: RESEND_API_KEY"):
        Settings()


def production_with(monkeypatch: pytest.MonkeyPatch, **changes: str) -> None:
    for name, value in {**PRODUCTION, **changes}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (target, name.upper())
        for target, names in PRODUCTION_REQUIRED_BY_TARGET.items()
        for name in names
    ],
)
@pytest.mark.parametrize("value", ["", "   ", "\t"])
def test_production_names_each_empty_secret(
    monkeypatch: pytest.MonkeyPatch, target: str, name: str, value: str
) -> None:
    # `STRIPE_WEBHOOK_SECRET=` once made production verify with the public development secret.
    production_with(monkeypatch, FUNCTION_TARGET=target, **{name: value})
    with pytest.raises(SettingsError, match=f"missing: {name}"):
        Settings()


def test_production_refuses_the_public_dev_jwt_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**PRODUCTION, "SUPABASE_JWT_SECRET": DEV_JWT_SECRET}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(
        SettingsError, match=r"SUPABASE_JWT_SECRET \(a public example or development value"
    ):
        Settings()


def test_the_dev_jwt_secret_signs_only_locally_without_a_supabase_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().jwt_secret == DEV_JWT_SECRET
    monkeypatch.setenv("SUPABASE_JWT_SECRET", "s" * 40)
    assert Settings().jwt_secret == "s" * 40
    monkeypatch.delenv("SUPABASE_JWT_SECRET")
    monkeypatch.setenv("SUPABASE_URL", "https://proj.supabase.co")
    assert Settings().jwt_secret is None  # tokens are checked against the project's JWKS
    for name, value in PRODUCTION.items():
        monkeypatch.setenv(name, value)
    assert Settings().jwt_secret is None
    monkeypatch.delenv("SUPABASE_URL")
    with pytest.raises(SettingsError, match="SUPABASE_URL"):
        Settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STRIPE_WEBHOOK_SECRET", DEV_WEBHOOK_SECRET),
        ("STRIPE_WEBHOOK_SECRET", f"  {DEV_WEBHOOK_SECRET} "),
        ("SUPABASE_JWT_SECRET", SUPABASE_LOCAL_JWT_SECRET),
        ("GITHUB_TOKEN", "ghp_..."),
    ],
)
def test_production_refuses_public_values(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    production_with(monkeypatch, **{name: value})
    with pytest.raises(SettingsError, match=f"unsafe: {name} \\(a public"):
        Settings()


def example_values() -> list[tuple[str, str]]:
    """Every `# NAME=value` of .env.example whose NAME production requires or checks."""
    checked = {name.upper() for name in (*PRODUCTION_REQUIRED, *PRODUCTION_OPTIONAL)}
    found = []
    for line in ENV_EXAMPLE.read_text().splitlines():
        name, _, value = line.removeprefix("# ").partition("=")
        if name in checked and value:
            found.append((name, value))
    return found


@pytest.mark.parametrize(("name", "value"), example_values())
def test_production_refuses_every_example_value(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    production_with(monkeypatch, **{name: value})
    with pytest.raises(SettingsError, match=f"unsafe: {name} "):
        Settings()


def test_the_examples_cover_each_required_secret() -> None:
    named = {name for name, _ in example_values()}
    assert {"STRIPE_WEBHOOK_SECRET", "STRIPE_SECRET_KEY", "DATABASE_URL", "SITE_URL"} <= named


def test_production_refuses_the_in_process_bus(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**PRODUCTION, "EVENT_BUS": "inline"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match="EVENT_BUS=pubsub"):
        Settings()


@pytest.mark.parametrize("value", ["https://evil.example.net/x", "//evil.example.net", "dashboard"])
def test_callback_path_cannot_be_another_origin(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("AUTH_CALLBACK_URL", value)
    with pytest.raises(SettingsError, match="AUTH_CALLBACK_URL"):
        Settings()


def test_test_email_route_can_be_switched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENABLE_TEST_EMAIL", "false")
    assert Settings().test_email_enabled is False


def test_the_pool_size_defaults_to_the_former_fixed_size(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().database_pool_size == 10
    monkeypatch.setenv("DATABASE_POOL_SIZE", "2")
    assert Settings().database_pool_size == 2


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0", "greater than or equal to 1"),
        ("-1", "greater than or equal to 1"),
        ("101", "less than or equal to 100"),
        ("abc", "a valid integer"),
        ("2.5", "a valid integer"),
        ("", "a valid integer"),
        (" ", "a valid integer"),
    ],
)
def test_the_pool_size_must_be_a_count_of_connections(
    monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    monkeypatch.setenv("DATABASE_POOL_SIZE", value)
    with pytest.raises(SettingsError, match=rf"^DATABASE_POOL_SIZE: Input should be {reason}"):
        Settings()


POOLER = "postgresql://postgres.abcd:pw@aws-1-eu-west-2.pooler.supabase.com"


@pytest.mark.parametrize(
    "url",
    [
        f"{POOLER}:6543/postgres?sslmode=require",
        f"{POOLER}:6543/postgres?sslmode=verify-full&sslrootcert=/secrets/ca/supabase.crt",
        "host=db.example.com port=6543 dbname=postgres sslmode=verify-ca",
        # On this machine: a Unix socket or loopback never crosses a network.
        "postgresql://postgres@/postgres?host=/var/run/postgresql",
        "postgresql://u:p@127.0.0.1:5432/app",
    ],
)
def test_production_takes_a_transaction_pooler_over_tls(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    for name, value in {**PRODUCTION, "DATABASE_URL": url}.items():
        monkeypatch.setenv(name, value)
    assert Settings().database_url is not None


@pytest.mark.parametrize(
    ("url", "named"),
    [
        (f"{POOLER}:5432/postgres?sslmode=require", "Transaction pooler's string (port 6543)"),
        (f"{POOLER}:6543/postgres", "add sslmode=require"),
        (f"{POOLER}:6543/postgres?sslmode=prefer", "add sslmode=require"),
        ("postgresql://u:p@db.example.com/postgres?sslmode=disable", "add sslmode=require"),
        ("postgresql://u:p@db.example.com/postgres?sslmode=bogus&x", "not a Postgres connection"),
    ],
)
def test_production_refuses_the_session_pooler_and_plain_connections(
    monkeypatch: pytest.MonkeyPatch, url: str, named: str
) -> None:
    for name, value in {**PRODUCTION, "DATABASE_URL": url}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match="refuses DATABASE_URL") as raised:
        Settings()
    assert named in str(raised.value)
    assert "pw@" not in str(raised.value), "the password never appears in the error"


def test_development_takes_any_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"{POOLER}:5432/postgres")
    assert Settings().database_url is not None


def test_several_problems_give_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # Production without its secrets, with a development database URL and a half push setup.
    monkeypatch.setenv("APP_ENV", "production")
    monkeypatch.setenv("FUNCTION_TARGET", "emails")
    monkeypatch.setenv("DATABASE_URL", f"{POOLER}:5432/postgres?sslmode=require")
    monkeypatch.setenv("PUSH_AUDIENCE", "https://emails.example.run.app")
    with pytest.raises(SettingsError) as raised:
        Settings()
    problems = raised.value.problems
    assert str(raised.value).splitlines() == list(problems)
    assert problems[:3] == (
        "APP_ENV=production refuses DATABASE_URL: it names Supabase's session pooler (port"
        " 5432), which caps every instance together at the project's pool size; use the"
        " Transaction pooler's string (port 6543) from the dashboard's Connect panel",
        "EVENT_BUS: APP_ENV=production requires EVENT_BUS=pubsub",
        "set PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT together, or neither",
    )
    assert problems[3:] == tuple(
        f"missing: {name} (APP_ENV=production requires it for the emails target)"
        for name in ("SITE_URL", "SUPABASE_URL", "SUPABASE_SECRET_KEY", "RESEND_API_KEY")
    )
    assert "pw@" not in str(raised.value), "the password never appears in the error"


def test_each_wrong_value_is_one_line_without_the_libraries_framing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_POOL_SIZE", "0")
    monkeypatch.setenv("RATE_LIMIT_ME", "often")
    monkeypatch.setenv("COOKIE_DOMAIN", "https://example.com/")
    monkeypatch.setenv("STRIPE_SECRET_KEY", "sk_live_not_to_be_printed")
    monkeypatch.setenv("PORT", "http")
    with pytest.raises(SettingsError) as raised:
        Settings()
    assert sorted(raised.value.problems) == [
        "COOKIE_DOMAIN must be a domain such as example.com",
        "DATABASE_POOL_SIZE: Input should be greater than or equal to 1",
        "PORT: Input should be a valid integer, unable to parse string as an integer",
        "RATE_LIMIT_ME: not a rate limit like '10/minute': 'often'",
    ]
    text = str(raised.value)
    assert "validation error" not in text
    assert "pydantic" not in text
    assert "type=" not in text


def test_brand_name_defaults_to_the_admin_senders_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().product_name == "Acme"
    monkeypatch.setenv("EMAIL_FROM_ADMIN", '"Globex Team" <team@globex.example>')
    assert (Settings().brand_name, Settings().product_name) == (None, "Globex")
    monkeypatch.setenv("EMAIL_FROM_ADMIN", "<team@globex.example>")
    assert Settings().product_name == "Acme"
    monkeypatch.setenv("BRAND_NAME", " Initech ")
    assert Settings().product_name == "Initech"
    monkeypatch.setenv("BRAND_NAME", "")
    assert Settings().product_name == "Acme"


def test_settings_are_exactly_their_groups() -> None:
    # A group missing from GROUPS would escape its checks and production's rule; one missing
    # from Settings' bases would not be read at all.
    assert [group.fields for group in GROUPS] == [
        base for base in Settings.__bases__ if base is not BaseSettings
    ]
    grouped = {name for group in GROUPS for name in group.fields.model_fields}
    assert grouped == set(Settings.model_fields)


def test_tax_and_adaptive_pricing_take_only_their_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKOUT_TAX", "vat")
    monkeypatch.setenv("CHECKOUT_ADAPTIVE_PRICING", "yes")
    with pytest.raises(SettingsError) as raised:
        Settings()
    assert sorted(raised.value.problems) == [
        "CHECKOUT_ADAPTIVE_PRICING: Input should be 'on' or 'off'",
        "CHECKOUT_TAX: Input should be 'none', 'stripe_tax' or 'managed_payments'",
    ]
    monkeypatch.setenv("CHECKOUT_TAX", "managed_payments")
    monkeypatch.setenv("CHECKOUT_ADAPTIVE_PRICING", "")
    settings = Settings()
    assert (settings.checkout_tax, settings.checkout_adaptive_pricing) == ("managed_payments", None)


def test_production_selling_usage_needs_a_long_usage_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    production_with(monkeypatch, SELLS_USAGE="true")
    with pytest.raises(SettingsError, match=r"missing: USAGE_API_KEY \(SELLS_USAGE=true"):
        Settings()
    production_with(monkeypatch, SELLS_USAGE="true", USAGE_API_KEY="short")
    with pytest.raises(SettingsError, match=r"unsafe: USAGE_API_KEY \(shorter than 32"):
        Settings()
    production_with(monkeypatch, SELLS_USAGE="true", USAGE_API_KEY="u" * 40)
    assert Settings().sells_usage
    production_with(monkeypatch, SELLS_USAGE="false", USAGE_API_KEY="")
    assert Settings().usage_api_key is None


def test_the_outbox_follows_data_dir_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMAIL_OUTBOX_DIR", raising=False)
    monkeypatch.setenv("DATA_DIR", "/srv/elsewhere")
    assert Settings().email_outbox_dir == Path("/srv/elsewhere/outbox")
    monkeypatch.setenv("EMAIL_OUTBOX_DIR", "/srv/mail")
    assert Settings().email_outbox_dir == Path("/srv/mail")


def test_credits_alerts_are_percentages_of_a_grant_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDITS_ALERTS", raising=False)
    assert Settings().credits_alert_thresholds == (90,)
    monkeypatch.setenv("CREDITS_ALERTS", " 100,50, 90,50 ")
    assert Settings().credits_alert_thresholds == (50, 90, 100)
    monkeypatch.setenv("CREDITS_ALERTS", "")
    assert Settings().credits_alert_thresholds == ()
    for bad in ("0", "101", "ninety", "50%", "-5"):
        monkeypatch.setenv("CREDITS_ALERTS", f"50,{bad}")
        with pytest.raises(SettingsError, match=f"CREDITS_ALERTS: '{bad}' is not a percentage"):
            Settings()
