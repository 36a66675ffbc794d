"""GitHub's "add a repository collaborator" endpoint, as documented."""

from __future__ import annotations

from dataclasses import dataclass, field

from werkzeug.wrappers import Request, Response

from tests.fakes.http import FakeServer, json_response


@dataclass
class FakeGitHub:
    server: FakeServer = field(default_factory=FakeServer)
    known_users: set[str] = field(default_factory=lambda: {"octocat", "ada-l"})
    # Invited (repository, user) pairs; those in `accepted` are collaborators, the rest pending.
    collaborators: set[tuple[str, str]] = field(default_factory=set)
    accepted: set[tuple[str, str]] = field(default_factory=set)
    # While set, every call answers 503, as GitHub does in an outage.
    down: bool = False

    def __post_init__(self) -> None:
        self.server.route(
            "/repos/<owner>/<repo>/collaborators/<username>", ("PUT",), self._add_collaborator
        )
        self.server.route(
            "/repos/<owner>/<repo>/collaborators/<username>", ("DELETE",), self._remove
        )
        self.server.route("/repos/<owner>/<repo>/invitations", ("GET",), self._invitations)
        self.server.route(
            "/repos/<owner>/<repo>/invitations/<int:invitation>", ("DELETE",), self._uninvite
        )

    def _remove(self, request: Request, owner: str, repo: str, username: str) -> Response:
        if self.down:
            return json_response({"message": "Service Unavailable"}, 503)
        # GitHub answers 204 whether or not the user was a collaborator; an invitation stays.
        pair = (f"{owner}/{repo}", username)
        if pair in self.accepted:
            self.accepted.discard(pair)
            self.collaborators.discard(pair)
        return Response(status=204)

    def _invitations(self, request: Request, owner: str, repo: str) -> Response:
        full = f"{owner}/{repo}"
        pending = sorted(u for r, u in self.collaborators - self.accepted if r == full)
        return json_response(
            [
                {
                    "id": self._invitation_id(full, user),
                    "repository": {"id": 1296269, "full_name": full, "name": repo},
                    "invitee": {"login": user, "id": 2},
                    "permissions": "read",
                }
                for user in pending
            ]
        )

    def _uninvite(self, request: Request, owner: str, repo: str, invitation: int) -> Response:
        self.collaborators = {
            (r, u) for r, u in self.collaborators if self._invitation_id(r, u) != invitation
        }
        return Response(status=204)

    @staticmethod
    def _invitation_id(repository: str, username: str) -> int:
        return abs(hash((repository, username))) % 1_000_000

    def _add_collaborator(self, request: Request, owner: str, repo: str, username: str) -> Response:
        # GitHub logins ignore case.
        if username.lower() not in {u.lower() for u in self.known_users}:
            return json_response(
                {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, 404
            )
        full = f"{owner}/{repo}"
        if (full, username) in self.collaborators:
            return Response(status=204)
        self.collaborators.add((full, username))
        return json_response(
            {
                "id": 1,
                "node_id": "MDIwOlJlcG9zaXRvcnlJbnZpdGF0aW9uMQ==",
                "repository": {"id": 1296269, "full_name": full, "name": repo},
                "invitee": {"login": username, "id": 2},
                "inviter": {"login": "seller", "id": 3},
                "permissions": "read",
                "created_at": "2026-11-21T10:00:00Z",
                "expired": False,
                "url": "https://api.github.com/user/repository_invitations/1",
                "html_url": f"https://github.com/{full}/invitations",
            },
            status=201,
        )
