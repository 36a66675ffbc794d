"""Transactional e-mail content: every kind, minimal and full props, HTML validity, escaping."""

from __future__ import annotations

import html as htmllib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import css_inline
import html5lib
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, SecretStr, ValidationError

from dev.previews import emails_preview
from emails import render as rendering
from emails.kinds import KINDS, PROPS, REGISTRY, UnknownEmailKind, props_model, sample_props
from emails.props import DEFAULT_PATHS
from emails.render import Brand, EmailContent, format_amount, render

BRAND = Brand(
    product_name="Acme",
    site_url="https://app.acme.example.com/",
    support_email="help@acme.example.com",
)

REQUIRED: dict[str, dict[str, Any]] = {
    "purchase-confirmation": {
        "customer_email": "ada@example.com",
        "order_number": "ORD-1001",
        "product_name": "Starter Kit",
        "amount": "$49.00",
    },
    "payment-failed": {"amount": "€19.99"},
    "invoice-paid": {"amount": "$29.00", "invoice_number": "INV-0007"},
    "new-signup": {},
    "credits-low": {
        "feature": "generations",
        "balance": 9,
        "granted": 100,
        "as_of": "2026-11-21T14:30:00+00:00",
    },
    "credits-top-up-failed": {
        "feature": "generations",
        "pack_name": "500 generations",
        "at": "2026-11-21T14:30:00+00:00",
    },
    "github-access-granted": {"repository": "acme-labs/saas-starter"},
    "checkout-expired": {
        "product_name": "Starter Kit",
        "checkout_url": "https://checkout.stripe.com/c/pay/cs_test_1",
    },
    "subscription-cancelled": {},
    "signin-link": {
        "customer_email": "ada@example.com",
        "signin_url": "https://project.supabase.co/auth/v1/verify?token=t1&type=magiclink",
    },
    "trial-ending": {"trial_end_date": "2026-12-01"},
    "team-invitation": {
        "team_name": "Analytical Engines",
        "inviter": {"email": "eve@example.com"},
        "role": "admin",
        "accept_url": "https://app.example.com/invitations/accept?token=t0k3n",
        "expires_at": "2026-12-03T10:00:00Z",
    },
    "team-seat-lost": {"seats": 2},
    "team-seat-restored": {},
    "account-deleted": {},
}

# Required values a template shows in another form (a date as words).
DISPLAYED: dict[str, list[str]] = {
    "credits-low": ["generations credits", "9 of 100", "14:30 UTC on November 21, 2026"],
    "credits-top-up-failed": [
        "generations credits",
        "500 generations pack",
        "14:30 UTC on November 21, 2026",
        "Nothing was charged",
    ],
    "trial-ending": ["December 1, 2026"],
    "team-invitation": [
        "eve@example.com",
        '"Analytical Engines"',
        "as an admin",
        "https://app.example.com/invitations/accept?token=t0k3n",
        "December 3, 2026 at 10:00 UTC",
    ],
    # Without who named the team, its name is not shown.
    "team-seat-lost": ["A team you are a member of now has 2 seats"],
    "team-seat-restored": ["A team you are a member of added seats"],
}

GITHUB_PURCHASE = sample_props("purchase-confirmation").model_copy(
    update={"product_type": "github", "repository": "acme-labs/saas-starter", "download_links": ()}
)
FULL: list[tuple[str, BaseModel]] = [(kind, sample_props(kind)) for kind in KINDS]
FULL.append(("purchase-confirmation", GITHUB_PURCHASE))
FULL_IDS = [*KINDS, "purchase-confirmation-github"]

# Props that steer the layout rather than state a fact the reader must see verbatim.
NOT_VERBATIM = {"product_type", "billing", "without_card"}


def _facts(props: BaseModel) -> list[str]:
    """Every string the customer must find in the e-mail, from the props themselves."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                if name not in NOT_VERBATIM:
                    walk(getattr(value, name))
        elif isinstance(value, tuple | list):
            for item in value:
                walk(item)
        elif isinstance(value, SecretStr):
            found.append(value.get_secret_value())

    walk(props)
    return found


def _visible(html: str) -> str:
    """The HTML with tags kept but entities decoded, so href values and text compare as strings."""
    return htmllib.unescape(html)


def _assert_well_formed(kind: str, content: EmailContent) -> None:
    html5lib.HTMLParser(strict=True).parse(content.html)
    for part in (content.html, content.text, content.subject):
        assert "{{" not in part
        assert "{%" not in part
        assert "}}" not in part
    assert len(content.subject) <= REGISTRY[kind].subject_limit
    assert len(content.html.encode()) < 100_000
    assert not re.search(r"<img\b", content.html, re.IGNORECASE)
    assert not re.search(r"<(script|link)\b", content.html, re.IGNORECASE)


def test_kinds_and_props_models_line_up() -> None:
    assert KINDS == (
        "account-deleted",
        "checkout-expired",
        "credits-low",
        "credits-top-up-failed",
        "github-access-granted",
        "invoice-paid",
        "new-signup",
        "payment-failed",
        "purchase-confirmation",
        "signin-link",
        "subscription-cancelled",
        "team-invitation",
        "team-seat-lost",
        "team-seat-restored",
        "trial-ending",
    )
    assert tuple(PROPS) == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_renders_with_only_required_props(kind: str) -> None:
    content = render(kind, REQUIRED[kind], brand=BRAND)

    _assert_well_formed(kind, content)
    shown = DISPLAYED.get(kind, list(REQUIRED[kind].values()))
    for fact in [*shown, "Hi there,", "help@acme.example.com"]:
        assert fact in _visible(content.html), fact
        assert fact in content.text, fact


@pytest.mark.parametrize("kind", KINDS)
def test_required_props_are_exactly_what_the_email_cannot_do_without(kind: str) -> None:
    required = {name for name, field in PROPS[kind].model_fields.items() if field.is_required()}
    assert required == set(REQUIRED[kind])
    for missing in required:
        props = {k: v for k, v in REQUIRED[kind].items() if k != missing}
        with pytest.raises(ValidationError):
            render(kind, props, brand=BRAND)


@pytest.mark.parametrize(("kind", "props"), FULL, ids=FULL_IDS)
def test_renders_with_all_props_and_both_parts_carry_the_same_facts(
    kind: str, props: BaseModel
) -> None:
    content = render(kind, props, brand=BRAND)

    _assert_well_formed(kind, content)
    facts = _facts(props)
    assert facts
    for fact in facts:
        assert fact in _visible(content.html), fact
        assert fact in content.text, fact


def test_samples_set_every_prop_so_previews_show_everything() -> None:
    for kind in KINDS:
        props = sample_props(kind)
        assert isinstance(props, PROPS[kind])
        # But the links every mail's renderer fills (DEFAULT_PATHS): left to it, as real mails
        # leave them, so a sample links to the very pages a real mail does.
        unset = set(PROPS[kind].model_fields) - props.model_fields_set
        assert unset <= set(DEFAULT_PATHS), kind


def test_samples_link_to_the_pages_real_mails_link_to_on_the_given_site() -> None:
    site = "https://shop.example.org"
    brand = Brand(product_name="Acme", site_url=site, support_email="help@acme.example.com")
    for kind in KINDS:
        content = render(kind, sample_props(kind, site), brand=brand)
        for part in (content.html, content.text):
            assert "acme.example.com/" not in part.replace("help@acme.example.com", ""), kind
            assert "/dashboard/billing" not in part, kind
    paid = render("payment-failed", sample_props("payment-failed", site), brand=brand)
    assert f'href="{site}/dashboard"' in paid.html


def test_purchase_confirmation_states_order_details_downloads_invoice_and_next_steps() -> None:
    content = render("purchase-confirmation", sample_props("purchase-confirmation"), brand=BRAND)

    for part in (_visible(content.html), content.text):
        assert "Order number" in part
        assert "https://acme.example.com/downloads/starter-kit" in part
        assert "https://invoice.stripe.com/i/acct_1Acme/test_inv_4817" in part
        assert "Next steps" in part
        assert "November 21, 2026" in part


def test_github_purchase_explains_how_to_get_repository_access() -> None:
    content = render("purchase-confirmation", GITHUB_PURCHASE, brand=BRAND)

    for part in (_visible(content.html), content.text):
        assert "GitHub username" in part
        assert "acme-labs/saas-starter" in part
        assert "https://app.acme.example.com/dashboard/products" in part


def test_github_access_gives_clone_command_invitation_and_docs() -> None:
    content = render("github-access-granted", REQUIRED["github-access-granted"], brand=BRAND)

    for part in (_visible(content.html), content.text):
        assert "git clone https://github.com/acme-labs/saas-starter.git" in part
        assert "https://github.com/acme-labs/saas-starter/invitations" in part
        assert "https://github.com/acme-labs/saas-starter#readme" in part


def test_empty_links_default_to_pages_of_the_site() -> None:
    payment = render("payment-failed", REQUIRED["payment-failed"], brand=BRAND)
    signup = render("new-signup", {"temporary_password": "s3cret-Pass"}, brand=BRAND)

    assert 'href="https://app.acme.example.com/dashboard"' in payment.html
    assert "https://app.acme.example.com/dashboard" in payment.text
    assert "s3cret-Pass" in signup.text
    assert "s3cret-Pass" in signup.html
    assert 'href="https://app.acme.example.com/signin"' in signup.html


def test_customer_values_are_escaped_in_html_and_verbatim_in_text() -> None:
    hostile = "<script>alert(1)</script>"
    props = {**REQUIRED["purchase-confirmation"], "customer_name": hostile}
    props["product_name"] = 'Kit "Pro" & <b>more</b>'
    content = render("purchase-confirmation", props, brand=BRAND)

    assert "<script" not in content.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in content.html
    assert "<b>more</b>" not in content.html
    assert f"Hi {hostile}," in content.text
    html5lib.HTMLParser(strict=True).parse(content.html)


def test_a_quote_in_a_link_cannot_add_attributes() -> None:
    url = 'https://checkout.stripe.com/c/pay/x" onclick="steal()'
    content = render("checkout-expired", {"product_name": "Kit", "checkout_url": url}, brand=BRAND)

    document = html5lib.parse(content.html, namespaceHTMLElements=False)
    assert all("onclick" not in element.attrib for element in document.iter())


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "data:text/html,x", "/relative", "ftp://x.y"]
)
def test_links_must_be_absolute_web_urls(url: str) -> None:
    with pytest.raises(ValidationError):
        render("checkout-expired", {"product_name": "Kit", "checkout_url": url}, brand=BRAND)


def test_unknown_kind_and_unknown_props_are_refused() -> None:
    with pytest.raises(UnknownEmailKind):
        render("password-reset", {}, brand=BRAND)
    with pytest.raises(ValueError, match="unknown e-mail kind"):
        sample_props("nope")
    with pytest.raises(ValidationError):
        render("new-signup", {"customer_nmae": "typo"}, brand=BRAND)


def test_a_missing_customer_name_falls_back_to_the_generic_greeting() -> None:
    content = render("subscription-cancelled", {"customer_name": None}, brand=BRAND)
    assert "Hi there," in content.text


def test_unix_timestamps_from_stripe_become_calendar_days() -> None:
    end = int(datetime(2026, 12, 20, 15, 30, tzinfo=UTC).timestamp())
    content = render("subscription-cancelled", {"access_end_date": end}, brand=BRAND)

    assert "December 20, 2026" in content.text
    assert "December 20, 2026" in _visible(content.html)


def test_css_is_inlined_and_only_media_queries_stay_in_a_style_block() -> None:
    content = render("invoice-paid", sample_props("invoice-paid"), brand=BRAND)

    styles = re.findall(r"<style[^>]*>(.*?)</style>", content.html, re.DOTALL)
    assert all(block.strip().startswith("@media") for block in styles)
    assert re.search(r'<td class="card"[^>]* style="[^"]*background-color', content.html)
    assert re.search(r'<td [^>]*bgcolor="#4f46e5"[^>]*>\s*<a [^>]*class="button"', content.html)
    assert 'class="preheader"' in content.html
    assert "We received your payment of $29.00" in content.html


LONG_NAME = "The Complete Enterprise SaaS Starter Kit with Lifetime Updates and Priority Support"


@pytest.mark.parametrize("kind", KINDS)
def test_subjects_stay_within_their_kinds_limit_with_long_names(kind: str) -> None:
    brand = Brand(
        product_name="Acme Cloud Platform for Enterprise Teams Worldwide",
        site_url="https://acme.example.com",
        support_email="help@acme.example.com",
    )
    props = dict(REQUIRED[kind])
    if "product_name" in PROPS[kind].model_fields:
        props["product_name"] = LONG_NAME
    if "repository" in PROPS[kind].model_fields:
        props["repository"] = "acme-enterprise-labs/the-complete-saas-starter-kit-with-everything"
    if "amount" in props:
        props["amount"] = "BHD 1,234,567.890"
    if "inviter" in props:
        props["team_name"] = "Analytical Engines of Great Britain"
        props["inviter"] = {
            "email": "augusta.ada.lovelace@analytical.example.com",
            "name": LONG_NAME,
        }

    subject = render(kind, props, brand=brand).subject

    assert len(subject) <= REGISTRY[kind].subject_limit, subject
    assert "{" not in subject
    if "inviter" in props:  # the address and the team's name are never cut: the rest goes
        assert subject == (
            "augusta.ada.lovelace@analytical.example.com invited you to the team"
            ' "Analytical Engines of Great Britain"'
        )


def test_subjects_read_naturally() -> None:
    subjects = {kind: render(kind, sample_props(kind), brand=BRAND).subject for kind in KINDS}

    assert subjects["purchase-confirmation"] == "Order confirmed: Starter Kit Pro"
    assert subjects["payment-failed"] == "Action needed: your €19.99 payment failed"
    assert subjects["checkout-expired"] == "Still thinking about Starter Kit Pro?"
    long = render(
        "checkout-expired", {**REQUIRED["checkout-expired"], "product_name": LONG_NAME}, brand=BRAND
    )
    assert long.subject == "Still thinking about The Complete Enterprise…?"


@pytest.mark.parametrize(
    ("minor", "currency", "expected"),
    [
        (4900, "usd", "$49.00"),
        (1999, "eur", "€19.99"),
        (500, "gbp", "£5.00"),
        (5000, "jpy", "¥5,000"),
        (1250, "chf", "CHF 12.50"),
        (123456789, "usd", "$1,234,567.89"),
        (12345, "kwd", "KWD 12.345"),
        (1000, "bhd", "BHD 1.000"),
        (50000, "krw", "₩50,000"),
        (5, "usd", "$0.05"),
        (0, "eur", "€0.00"),
        (-1500, "usd", "-$15.00"),
        (4900, "USD", "$49.00"),
    ],
)
def test_format_amount(minor: int, currency: str, expected: str) -> None:
    assert format_amount(minor, currency) == expected


@pytest.mark.parametrize("currency", ["", "us", "dollars", "12a"])
def test_format_amount_refuses_non_currency_codes(currency: str) -> None:
    with pytest.raises(ValueError, match="currency"):
        format_amount(100, currency)


def test_brand_refuses_a_relative_site_url() -> None:
    with pytest.raises(ValueError, match="site_url"):
        Brand(product_name="Acme", site_url="/", support_email="help@acme.example.com")


def test_dates_in_samples_render_in_long_form() -> None:
    content = render("invoice-paid", sample_props("invoice-paid"), brand=BRAND)
    assert "November 21 \u2013 December 20, 2026" in content.text
    assert "Next payment:     December 21, 2026" in content.text


def test_billing_is_stated_only_when_known() -> None:
    unknown = render("purchase-confirmation", REQUIRED["purchase-confirmation"], brand=BRAND)
    yearly = render(
        "purchase-confirmation",
        {**REQUIRED["purchase-confirmation"], "billing": "year"},
        brand=BRAND,
    )
    monthly = render(
        "checkout-expired",
        sample_props("checkout-expired").model_copy(update={"billing": "month"}),
        brand=BRAND,
    )

    assert "Billing:" not in unknown.text
    assert "One-time" not in unknown.text
    assert "Yearly subscription" in yearly.text
    assert "Yearly subscription" in yearly.html
    assert "$149.00 per month" in monthly.text


def test_preview_command_writes_both_parts_of_every_kind_and_a_gallery(tmp_path: Path) -> None:
    result = CliRunner().invoke(emails_preview, ["--out", str(tmp_path / "previews")])

    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (tmp_path / "previews").iterdir())
    assert written == sorted(
        [*(f"{k}.html" for k in KINDS), *(f"{k}.txt" for k in KINDS), "README.md"]
    )
    gallery = (tmp_path / "previews" / "README.md").read_text()
    for kind in KINDS:
        assert f"]({kind}.png)" in gallery
        assert render(kind, sample_props(kind), brand=BRAND).subject in gallery


def _serialised(html: str) -> str:
    """The document as html5ever writes it: the same for markup that differs only in escaping."""
    return css_inline.CSSInliner(
        inline_style_tags=False, keep_style_tags=True, load_remote_stylesheets=False
    ).inline(html)


@pytest.mark.parametrize(
    ("kind", "props"),
    [*FULL, *((kind, props_model(kind).model_validate(REQUIRED[kind])) for kind in KINDS)],
)
def test_inlining_once_per_shape_gives_what_inlining_the_whole_page_gives(
    kind: str, props: BaseModel
) -> None:
    content = render(kind, props, brand=BRAND)
    marked = (
        rendering._environment(html=True)
        .get_template(f"{kind}.html")
        .render(rendering._context(kind, props, BRAND))
    )
    whole_page = rendering._inliner().inline(rendering._MARKED.sub(r"\1", marked))
    assert _serialised(content.html) == _serialised(whole_page)


@pytest.mark.parametrize(
    "markup",
    [
        "<table><tr>{0}<td>{1}</td></tr></table>",  # a value moved out of the table
        '<b title="{0}"><p>x</b>{1}</p>',  # an element, with its value, copied
        "<frameset>{0}</frameset><p>{1}</p>",  # a value dropped
    ],
)
def test_values_follow_the_parser_where_it_repairs_markup(markup: str) -> None:
    marked = markup.format("\ue000Ada\ue001", "\ue000Eve\ue001")
    whole_page = rendering._inliner().inline(markup.format("Ada", "Eve"))
    assert rendering._inline(marked) == whole_page


def test_the_style_sheet_is_inlined_once_per_shape_not_per_send() -> None:
    first = sample_props("invoice-paid")
    render("invoice-paid", first, brand=BRAND)
    before = rendering._inlined_skeleton.cache_info()
    for name in ("Grace Hopper", "Alan <Turing> & Co", "Barbara Liskov"):
        content = render(
            "invoice-paid", first.model_copy(update={"customer_name": name}), brand=BRAND
        )
        assert f"Hi {htmllib.escape(name, quote=False)}," in content.html
    after = rendering._inlined_skeleton.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + 3)


def test_a_value_cannot_forge_the_slots_values_are_inlined_into() -> None:
    name = "Eve \ue0000\ue001 \ue001\ue000"
    content = render(
        "invoice-paid",
        sample_props("invoice-paid").model_copy(update={"customer_name": name}),
        brand=BRAND,
    )
    assert "Hi Eve \ufffd0\ufffd \ufffd\ufffd," in content.html
    assert not re.search("[\ue000\ue001]", content.html)
    _assert_well_formed("invoice-paid", content)


def test_a_warning_callout_gets_its_own_colours() -> None:
    content = render("payment-failed", sample_props("payment-failed"), brand=BRAND)
    assert re.search(r'class="callout-cell" style="[^"]*#fff7ed', content.html)


EVE = {"email": "eve@example.com", "name": "Eve"}
NAMED_BY_EVE = {"name": "Night Owls", "named_by": EVE}


def test_team_mails_quote_the_team_name_and_name_who_wrote_it() -> None:
    invitation = render(
        "team-invitation",
        {**REQUIRED["team-invitation"], "team_name": "Night Owls", "inviter": EVE},
        brand=BRAND,
    )
    lost = render("team-seat-lost", {"team": NAMED_BY_EVE, "seats": 2}, brand=BRAND)
    restored = render("team-seat-restored", {"team": NAMED_BY_EVE}, brand=BRAND)

    said = 'Eve (eve@example.com) invited you to the team "Night Owls" on Acme'
    assert invitation.subject == said
    assert f"{said} as an admin." in invitation.text
    assert (
        '<strong>Eve (eve@example.com)</strong> invited you to the team <strong>"Night Owls"'
        "</strong> on Acme as an admin." in _visible(invitation.html)
    )
    for mail, then in ((lost, "now has 2 seats"), (restored, "added seats")):
        assert mail.subject.startswith("Your team seat on Acme")
        assert "Night Owls" not in mail.subject
        assert f'The team "Night Owls", named by Eve (eve@example.com), {then}' in mail.text
        assert (
            f'The team <strong>"Night Owls"</strong>, named by Eve (eve@example.com), {then}'
            in _visible(mail.html)
        )


@pytest.mark.parametrize(
    "name",
    [
        "Acme Security: verify at https://acme-login.example",
        "support@acme.example.com",
        "acme.com support",
        "Acme\nSecurity",
        "Acme \u202eytiruceS",
    ],
)
def test_an_inviters_name_that_is_not_plain_text_is_left_out(name: str) -> None:
    props = {**REQUIRED["team-invitation"], "inviter": {"email": "eve@example.com", "name": name}}
    content = render("team-invitation", props, brand=BRAND)

    assert content.subject.startswith("eve@example.com invited you to the team")
    assert name not in content.text
    assert "eve@example.com invited you" in content.text


def test_a_team_name_is_escaped_in_html_and_verbatim_in_text() -> None:
    props = {**REQUIRED["team-invitation"], "team_name": "<b>Owls</b> & Co"}
    content = render("team-invitation", props, brand=BRAND)

    assert "<b>Owls" not in content.html
    assert "&lt;b&gt;Owls&lt;/b&gt; &amp; Co" in content.html
    assert '"<b>Owls</b> & Co"' in content.text
    html5lib.HTMLParser(strict=True).parse(content.html)
