"""A real local HTTP server for faking a SaaS API at its boundary, recording what it was sent."""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

Handler = Callable[..., Response]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    query: list[tuple[str, str]]
    body: bytes

    def form(self) -> dict[str, Any]:
        """The body decoded the way Stripe encodes parameters (`a[b][0][c]=v`)."""
        return decode_stripe_form(parse_qsl(self.body.decode(), keep_blank_values=True))

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeServer:
    """Routes registered with `route`; every request is kept in `requests`."""

    requests: list[Recorded] = field(default_factory=list)
    _map: Map = field(default_factory=Map)
    _handlers: dict[str, Handler] = field(default_factory=dict)
    url: str = ""

    def route(self, rule: str, methods: tuple[str, ...], handler: Handler) -> None:
        endpoint = f"{handler.__name__}:{rule}:{methods}"
        self._map.add(Rule(rule, methods=list(methods), endpoint=endpoint))
        self._handlers[endpoint] = handler

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        body = request.get_data()
        self.requests.append(
            Recorded(
                request.method,
                request.path,
                dict(request.headers),
                list(request.args.items(multi=True)),
                body,
            )
        )
        adapter = self._map.bind_to_environ(environ)
        try:
            endpoint, args = adapter.match()
            response = self._handlers[endpoint](request, **args)
        except Exception as exc:
            response = Response(
                json.dumps({"error": {"message": str(exc)}}),
                status=404,
                content_type="application/json",
            )
        return response(environ, start_response)

    def calls(self, method: str, path_prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    def reset(self) -> None:
        self.requests.clear()


def json_response(
    data: Any, status: int = 200, *, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        json.dumps(data), status=status, content_type="application/json", headers=headers
    )


@contextmanager
def hanging_server() -> Iterator[str]:
    """A loopback address that accepts connections and never answers (a stuck dependency)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # the kernel completes handshakes; nobody ever reads or writes
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def serve(app: Callable[..., Any]) -> Generator[str, None, None]:
    """Serve a WSGI app on a free loopback port until the generator is closed."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)


def decode_stripe_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Rebuild nested params from `key[sub][0]=value` pairs."""
    root: dict[str, Any] = {}
    for key, value in pairs:
        parts = key.replace("]", "").split("[")
        node: Any = root
        for part, nxt in itertools.pairwise(parts):
            child: Any = [] if nxt.isdigit() else {}
            if isinstance(node, list):
                index = int(part)
                while len(node) <= index:
                    node.append(child)
                node = node[index]
            else:
                node = node.setdefault(part, child)
        last = parts[-1]
        if isinstance(node, list):
            node.append(value)
        else:
            node[last] = value
    return root
