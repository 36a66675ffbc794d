"""A real local HTTP server for faking a SaaS API at its boundary, recording what it was sent."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.test import EnvironBuilder, run_wsgi_app
from werkzeug.wrappers import Request, Response

from dev.stripe_stand_in import decode_stripe_form

Handler = Callable[..., Response]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    query: list[tuple[str, str]]
    body: bytes
    # The client's port: requests that share it came over one kept-alive connection.
    client_port: int = 0

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
    _connections: dict[int, socket.socket] = field(default_factory=dict)
    url: str = ""

    def route(self, rule: str, methods: tuple[str, ...], handler: Handler) -> None:
        endpoint = f"{handler.__name__}:{rule}:{methods}"
        self._map.add(Rule(rule, methods=list(methods), endpoint=endpoint))
        self._handlers[endpoint] = handler

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        body = request.get_data()
        if isinstance(connection := environ.get("werkzeug.socket"), socket.socket):
            self._connections[id(connection)] = connection
        self.requests.append(
            Recorded(
                request.method,
                request.path,
                dict(request.headers),
                list(request.args.items(multi=True)),
                body,
                int(environ.get("REMOTE_PORT") or 0),
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

    def close_connections(self) -> None:
        """Close every connection clients keep alive, as a server's idle timeout does."""
        for connection in self._connections.values():
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._connections.clear()


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


class KeepAliveHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with connections kept alive, as the faked APIs' servers do. Werkzeug's server
    closes every connection (and drains the socket after each answer), so a client's reuse of
    connections could not be seen there. Bodies come with a Content-Length, as the SDKs send."""

    protocol_version = "HTTP/1.1"
    # As the real APIs' front ends do (nginx's `tcp_nodelay on`): an answer's headers and body,
    # written apart, would otherwise wait on the client's delayed ACK, 40 ms an answer.
    disable_nagle_algorithm = True

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        environ = EnvironBuilder(
            path=self.path,
            method=self.command,
            headers=list(self.headers.items()),
            data=body,
            environ_overrides={
                "REMOTE_ADDR": self.client_address[0],
                "REMOTE_PORT": str(self.client_address[1]),
                "werkzeug.socket": self.connection,
            },
        ).get_environ()
        chunks, status, headers = run_wsgi_app(self.server.app, environ, buffered=True)  # type: ignore[attr-defined]
        payload = b"".join(chunks)
        self.send_response(int(status.split()[0]))
        for name, value in headers.items():
            if name.lower() not in {"content-length", "connection"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _threaded(server: Any) -> Iterator[None]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()


def serve(
    app: Callable[..., Any], *, keep_alive: bool = False, tls: ssl.SSLContext | None = None
) -> Generator[str, None, None]:
    """Serve a WSGI app on a free loopback port until the generator is closed; `keep_alive`
    keeps connections open between requests (KeepAliveHandler) where werkzeug closes them;
    `tls` serves HTTPS (for `localhost`, the name in the URL), as the real APIs do."""
    if keep_alive or tls:
        server: Any = ThreadingHTTPServer(("127.0.0.1", 0), KeepAliveHandler)
        server.daemon_threads = True
        server.app = app
        if tls:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
    else:
        server = make_server("127.0.0.1", 0, app, threaded=True)
    with _threaded(server):
        scheme, host = ("https", "localhost") if tls else ("http", "127.0.0.1")
        yield f"{scheme}://{host}:{server.server_port}"
