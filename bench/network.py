"""An internet hop between a system and its Postgres: a TCP relay that holds every chunk for
`delay` seconds each way (order kept, throughput not capped), as Supabase an internet hop away
does; what `tc netem` would do, without root or a network namespace."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from urllib.parse import quote, urlencode

from psycopg.conninfo import conninfo_to_dict


class DelayProxy:
    def __init__(self, host: str, port: int, delay: float) -> None:
        self._host, self._port, self._delay = host, port, delay
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self.port = 0

    def start(self) -> int:
        threading.Thread(target=self._run, daemon=True).start()
        self._started.wait(10)
        return self.port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _shutdown(self) -> None:
        """Cancel the relays still open, so none is left pending when the loop stops."""
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._host.startswith("/"):  # a Unix socket directory, as the embedded server's
            return await asyncio.open_unix_connection(f"{self._host}/.s.PGSQL.{self._port}")
        return await asyncio.open_connection(self._host, self._port)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await self._open()
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.create_task(self._send(queue, writer))
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                queue.put_nowait((loop.time() + self._delay, data))
        queue.put_nowait((loop.time() + self._delay, b""))
        await sender

    async def _send(
        self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionError):
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        writer.close()


@contextlib.contextmanager
def delayed(database_url: str, delay_ms: float) -> Iterator[str]:
    """`database_url` reached through a DelayProxy (itself when `delay_ms` is 0). The URL keeps
    its parameters (TLS to a pooler) and names `localhost` when the original did (the pooler's
    certificate is for that name)."""
    if delay_ms <= 0:
        yield database_url
        return
    params = conninfo_to_dict(database_url)
    host = str(params.pop("host", None) or "127.0.0.1")
    proxy = DelayProxy(host, int(params.pop("port", None) or 5432), delay_ms / 1000)
    port = proxy.start()
    user, password = params.pop("user", None) or "", params.pop("password", None)
    dbname = quote(str(params.pop("dbname", None) or ""))
    credentials = quote(str(user)) + (f":{quote(str(password))}" if password else "")
    name = "localhost" if host == "localhost" else "127.0.0.1"
    query = urlencode({k: str(v) for k, v in params.items()})
    # A URL, not libpq's key=value form: node-postgres (stripe-sync-engine) reads only URLs.
    try:
        yield f"postgresql://{credentials}@{name}:{port}/{dbname}" + (f"?{query}" if query else "")
    finally:
        proxy.stop()
