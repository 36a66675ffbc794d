"""A repository invitation was sent to the buyer's GitHub account."""

from __future__ import annotations

from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import GITHUB_ACCESS_GRANTED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps, Name, NamedLink, Repository, Text
from emails.subjects import fit


class GithubAccessGrantedProps(EmailProps):
    """A repository invitation was sent to the buyer's GitHub account."""

    repository: Repository
    product_name: Text | None = None
    github_username: Name | None = None
    docs_links: tuple[NamedLink, ...] = ()

    @property
    def repository_url(self) -> str:
        """The repository's page on GitHub."""
        return f"https://github.com/{self.repository}"

    @property
    def clone_url(self) -> str:
        """The HTTPS URL for `git clone`."""
        return f"{self.repository_url}.git"

    @property
    def invitation_url(self) -> str:
        """Where GitHub lets the invitee accept a pending collaborator invitation."""
        return f"{self.repository_url}/invitations"


def subject(p: GithubAccessGrantedProps, _: Brand) -> str:
    return fit("GitHub access granted: ", p.repository)


def _granted(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any]:
    grant = event.object
    return {
        "repository": grant["repository"],
        "product_name": grant.get("product_name"),
        "github_username": grant.get("github_username"),
    }


KIND = Kind(
    name="github-access-granted",
    props=GithubAccessGrantedProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "repository": "acme-labs/saas-starter",
        "product_name": "SaaS Starter Source",
        "github_username": "adalovelace",
        "docs_links": [
            {"label": "Quick start", "url": f"{site}/docs/quick-start"},
            {"label": "Deploying to Cloud Run", "url": f"{site}/docs/deploy"},
        ],
    },
    triggers={GITHUB_ACCESS_GRANTED: _granted},
)
