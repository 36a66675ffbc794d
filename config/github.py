"""GitHub: the token that invites buyers of `github` products to their repositories."""

from __future__ import annotations

from pydantic import AnyHttpUrl, SecretStr

from config.checks import Group
from config.environment import Environment


class GitHubSettings(Environment):
    # Unset: products that grant repository access answer that it is not configured.
    github_token: SecretStr | None = None
    github_api_url: AnyHttpUrl = AnyHttpUrl("https://api.github.com")


GROUP = Group(fields=GitHubSettings, optional_secrets=("github_token",))
