"""What an e-mail kind declares: its props model, subject, sample, sender and triggers.

Each kind is one module in `emails/kinds/` holding one `Kind`, plus its two templates
(`templates/emails/<name>.html` and `.txt`); the registry there collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from catalogue.rules import EmailProduct
from core.addresses import carries_address, has_hidden_characters
from core.brand import Brand
from core.events import Event
from core.money import format_amount
from core.stripe_objects import Amounts
from emails.props import EmailProps
from emails.subjects import SUBJECT_LIMIT

# team: EMAIL_FROM_ADMIN, to which a customer may reply; noreply: EMAIL_FROM_NOREPLY, for the
# account mails nobody answers (ShipFast's `resend.fromNoReply`).
Sender = Literal["team", "noreply"]
# Where the samples' links point when no site is given (the previews and the test route give
# SITE_URL's): a believable shop.
SAMPLE_SITE = "https://acme.example.com"

P = TypeVar("P", bound=EmailProps)


# Builds a kind's props from an event, the product it is about (when known) and the site's URL;
# None when this event calls for no e-mail after all.
Build = Callable[[Event, EmailProduct | None, str], dict[str, Any] | None]
# A kind's sample props on a site (its URL): links to the site's own pages are on it, and the
# pages every mail links to (`emails.props.DEFAULT_PATHS`) are left to the renderer, which
# fills them for the samples as for the real mails.
Sample = Callable[[str], Mapping[str, Any]]
# What a kind's mails say of the product they are about, from its facts: the builders' part and
# the samples' alike.
AboutProduct = Callable[[EmailProduct], Mapping[str, Any]]


@dataclass(frozen=True)
class Kind(Generic[P]):
    """One e-mail kind; `name` is its templates' name."""

    name: str
    props: type[P]
    subject: Callable[[P, Brand], str]
    # Realistic props setting every field but the default links, for the previews and the test
    # route.
    sample: Sample
    sender: Sender = "team"
    # The event types (Stripe's or `core.app_events`) that call for this e-mail, each with
    # what builds its props; none: the kind is sent only on request (the test route).
    triggers: Mapping[str, Build] = field(default_factory=dict)
    # The longest its subject gets: a subject that quotes someone's words and names them may
    # run longer than the others (emails/subjects.py).
    subject_limit: int = SUBJECT_LIMIT
    # What its mails say of a product; by default its name (for a kind whose props name one).
    about_product: AboutProduct | None = None

    def sample_props(self, site: str = SAMPLE_SITE, product: EmailProduct | None = None) -> P:
        """The sample on `site`, about `product` (one of the catalogue's) when given, validated
        into the props model."""
        values = dict(self.sample(site.rstrip("/")))
        if product is not None:
            values |= self.product_props(product)
        return self.props.model_validate(values)

    def product_props(self, product: EmailProduct) -> Mapping[str, Any]:
        """What this kind's mails say of `product`."""
        if self.about_product is not None:
            return self.about_product(product)
        return {"product_name": product.name} if "product_name" in self.props.model_fields else {}


@dataclass(frozen=True)
class Senders:
    """The addresses behind the kinds' senders, from settings."""

    team: str
    noreply: str

    def of(self, kind: Kind[Any]) -> str:
        """The From address of this kind's e-mails."""
        return self.noreply if kind.sender == "noreply" else self.team


def amount(minor: Any, currency: Any) -> str:
    """An amount in Stripe's minor units for display; a dash when the event does not say."""
    if not isinstance(minor, int) or not isinstance(currency, str):
        return "—"
    return format_amount(minor, currency)


def charged(amounts: Amounts | None) -> dict[str, Any]:
    """What a receipt says of the money, each amount as Stripe's session or invoice gives it,
    in the currency it gives: the subtotal, any discount and the tax when tax was charged (the
    tax "included" when the prices held it), the tax ids the buyer gave, and under Adaptive
    Pricing what the buyer's own currency was charged. Nothing when the object says nothing
    of it (an event from before these were read): the mail then shows its total alone."""
    if amounts is None or amounts.currency is None:
        return {}
    # A tax id is what the buyer typed: shown only when it is plain text, never a link.
    plain = [t for t in amounts.tax_ids if not carries_address(t) and not has_hidden_characters(t)]
    values: dict[str, Any] = {"tax_id": ", ".join(plain)[:200] or None}
    if amounts.tax:
        values |= {
            "subtotal": amount(amounts.subtotal, amounts.currency),
            "discount": amount(-amounts.discount, amounts.currency) if amounts.discount else None,
            "tax": amount(amounts.tax, amounts.currency),
            "tax_label": "Tax (included)" if amounts.tax_inclusive else "Tax",
        }
    if amounts.presentment_currency and amounts.presentment_amount is not None:
        values["charged"] = amount(amounts.presentment_amount, amounts.presentment_currency)
    return values


def get(obj: Any, *path: str) -> Any:
    """The value at `path` in nested mappings; None where one is missing."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def named_team(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The team an app event is about, with who wrote its name, as `NamedTeam` props; None when
    the event does not say who wrote it (one published before mails said so): the mail then
    speaks of the team without its name."""
    named_by = obj.get("team_named_by")
    if not isinstance(named_by, Mapping) or not named_by.get("email") or not obj.get("team_name"):
        return None
    return {
        "name": obj["team_name"],
        "named_by": {"email": named_by["email"], "name": named_by.get("name")},
    }
