"""Who an e-mail comes from; built from settings."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from core.addresses import web_url


@dataclass(frozen=True)
class Brand:
    """Who the e-mail comes from; built from settings."""

    product_name: str
    site_url: str
    support_email: str

    def __post_init__(self) -> None:
        # Relative links are dead links in an inbox: refuse them where the brand is built.
        try:
            web_url(self.site_url)
        except ValueError as exc:
            raise ValueError(f"Brand.site_url {exc}: {self.site_url!r}") from None
        if not self.product_name.strip() or "@" not in self.support_email:
            raise ValueError("Brand needs a product name and a support e-mail address")

    def url(self, path: str) -> str:
        """An absolute URL on the site for a path such as '/dashboard'."""
        return self.site_url.rstrip("/") + path

    @property
    def site_host(self) -> str:
        """The site without scheme, for display: 'acme.example.com'."""
        return urlsplit(self.site_url).netloc or self.site_url
