"""A subscriber target fed by StreamingPull: what `bin/serve` runs with SUBSCRIBER_DELIVERY=pull.

For a Cloud Run worker pool (no URL, no port needed) or an always-on service (which must
listen on PORT: `GET /healthz` answers 200 while the stream is open, 503 once it has ended).
SIGTERM stops leasing and finishes the messages held, within Cloud Run's 10 s; a stream that
fails for good (the subscription gone, permission denied) ends the process non-zero, and Cloud
Run starts another.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

from adapters.bus.pull import PullConsumer
from config import Settings, SettingsError
from runtime import logs
from runtime.container import Container

log = logging.getLogger(__name__)


def main() -> int:
    try:
        settings = Settings()
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"refusing to start: {problem}", file=sys.stderr, flush=True)
        return 1
    logs.configure(json_output=settings.json_logs, service=settings.service_context)
    if settings.subscriber_delivery != "pull":
        print("refusing to start: runtime.pull needs SUBSCRIBER_DELIVERY=pull", file=sys.stderr)
        return 1
    container = Container(settings)
    consumer = container.pull_consumer
    done = threading.Event()
    failed: list[BaseException] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("pull: %s, stopping", signal.Signals(signum).name)
        done.set()

    def watch() -> None:
        try:
            consumer.wait()
        except BaseException as exc:
            failed.append(exc)
        done.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    health = _health_server(settings.port, consumer)
    consumer.start()
    threading.Thread(target=watch, name="pull-watch", daemon=True).start()
    # Woken twice a second: the kernel may hand SIGTERM to one of gRPC's threads, and Python
    # runs its handler only once the main thread runs again; a wait with no timeout never would.
    while not done.wait(timeout=0.5):
        pass
    health.shutdown()
    container.close()
    if failed:
        log.error("pull: the stream ended: %s", failed[0])
        return 1
    return 0


def _health_server(port: int, consumer: PullConsumer) -> ThreadingHTTPServer:
    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz" and consumer.running()
            status = 200 if ok else (503 if self.path == "/healthz" else 404)
            body = b'{"status": "ok"}' if ok else b'{"error": "not pulling"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds: not worth a line each

    server = ThreadingHTTPServer(("0.0.0.0", port), Health)  # noqa: S104 - in a container
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server


if __name__ == "__main__":
    sys.exit(main())
