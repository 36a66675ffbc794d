"""GitHub through PyGithub: repository invitations for buyers of `github` products."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

# PyGithub loads a module per API object (costly to import): imported on first use, so that the
# processes which never call GitHub, and the first request of those that do, do not pay for it.
if TYPE_CHECKING:
    from github import Github

from config import MissingSetting

log = logging.getLogger(__name__)


class GitHubNotConfigured(MissingSetting):
    """GITHUB_TOKEN is not set."""


class GitHubUnavailable(RuntimeError):
    """GitHub could not be reached, timed out or failed on its side: try again later."""


class UnknownGitHubAccount(ValueError):
    """GitHub does not know the user name (or the repository is gone)."""


class GitHubGateway:
    """Invites collaborators; the client is built on first use."""

    def __init__(self, *, token: str | None, api_url: str, timeout: float) -> None:
        self._timeout = timeout
        self._token = token
        self._api_url = api_url.rstrip("/")

    def _client(self) -> Github:
        if not self._token:
            raise GitHubNotConfigured("Repository access is not configured: set GITHUB_TOKEN")
        from github import Auth, Github

        return Github(
            auth=Auth.Token(self._token),
            base_url=self._api_url,
            retry=2,
            seconds_between_requests=None,
            seconds_between_writes=None,
            lazy=True,
            timeout=max(1, round(self._timeout)),
        )

    def invite(self, *, repository: str, username: str) -> bool:
        """Invite `username` to read `repository`; False if they already have access."""
        import requests
        from github import GithubException

        client = self._client()
        repo = client.get_repo(repository)
        try:
            invitation = repo.add_to_collaborators(username, permission="pull")
        except GithubException as exc:
            if exc.status in (404, 422):
                raise UnknownGitHubAccount(f"GitHub has no user '{username}'") from exc
            if exc.status == 429 or exc.status >= 500:
                raise GitHubUnavailable(f"GitHub answered {exc.status}") from exc
            raise
        except requests.RequestException as exc:
            raise GitHubUnavailable(f"GitHub unreachable: {type(exc).__name__}") from exc
        finally:
            client.close()
        return invitation is not None

    def remove(self, *, repository: str, username: str) -> None:
        """Take `username` off `repository`: the collaborator, and an invitation still pending.

        Idempotent: GitHub answers 204 for someone who is no collaborator.
        """
        import requests
        from github import GithubException

        client = self._client()
        try:
            repo = client.get_repo(repository)
            repo.remove_from_collaborators(username)
            for invitation in repo.get_pending_invitations():
                if invitation.invitee and invitation.invitee.login.lower() == username.lower():
                    repo.remove_invitation(invitation.id)
        except GithubException as exc:
            if exc.status == 429 or exc.status >= 500:
                raise GitHubUnavailable(f"GitHub answered {exc.status}") from exc
            raise
        except requests.RequestException as exc:
            raise GitHubUnavailable(f"GitHub unreachable: {type(exc).__name__}") from exc
        finally:
            client.close()
        log.info("removed %s from %s", username, repository)
