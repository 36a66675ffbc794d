"""Every e-mail kind: one module per kind in this package, each declaring `KIND` (its props
model, subject, sample, sender and the events that call for it), plus its two templates,
`templates/emails/<name>.html` and `.txt`.

Adding a kind is those three files: the package is read here, in the modules' order, and
tests/emails/test_kinds.py checks that every kind is whole.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from catalogue.rules import EmailProduct
from emails.kind import SAMPLE_SITE, Kind
from emails.props import EmailProps


def _collect() -> dict[str, Kind[Any]]:
    found: dict[str, Kind[Any]] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        kind = getattr(importlib.import_module(f"{__name__}.{module}"), "KIND", None)
        if not isinstance(kind, Kind) or kind.name.replace("-", "_") != module:
            raise TypeError(f"{__name__}.{module} must declare KIND, a Kind named after it")
        found[kind.name] = kind
    return found


REGISTRY: dict[str, Kind[Any]] = _collect()
KINDS: tuple[str, ...] = tuple(REGISTRY)
PROPS: dict[str, type[EmailProps]] = {name: kind.props for name, kind in REGISTRY.items()}


class UnknownEmailKind(ValueError):
    """The e-mail kind is not one of KINDS."""


def kind_of(name: str) -> Kind[Any]:
    """The registered kind of this name."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownEmailKind(f"unknown e-mail kind {name!r}; expected one of {KINDS}") from None


def props_model(name: str) -> type[EmailProps]:
    """The props model of an e-mail kind."""
    return kind_of(name).props


def sample_props(
    name: str, site: str = SAMPLE_SITE, product: EmailProduct | None = None
) -> EmailProps:
    """The kind's sample on `site`, about `product` when given, validated into its props
    model."""
    props: EmailProps = kind_of(name).sample_props(site, product)
    return props
