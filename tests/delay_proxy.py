"""A TCP proxy for the benchmarks and the tests: each byte waits `delay` seconds each way (this kernel has no
netem), and the proxy counts round trips, as a client's bursts: a burst starts when the client writes after the
server last wrote (or first on a connection), which is a round trip the client waited for, whatever it pipelines
inside.

    proxy = DelayProxy("127.0.0.1", 5432)
    await proxy.start()          # proxy.port: where the client connects
    proxy.delay = 0.002          # 2 ms one-way, from the next chunk on
    before = proxy.round_trips   # read, act, read again: the difference is what the act cost
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

CHUNK = 65536


@dataclass
class _Conn:
    """One client connection: whose turn it is to speak (to count bursts)."""

    client_spoke_last: bool = False


class DelayProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.delay = 0.0
        self.round_trips = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(BaseException):
                await task

    async def _serve(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        assert me is not None
        self._conns.add(me)
        conn = _Conn()
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            c_writer.close()
            self._conns.discard(me)
            return
        up = asyncio.create_task(self._pipe(c_reader, s_writer, conn, from_client=True))
        down = asyncio.create_task(self._pipe(s_reader, c_writer, conn, from_client=False))
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
            for writer in (c_writer, s_writer):
                writer.close()
            self._conns.discard(me)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn, *, from_client: bool
    ) -> None:
        """Forward `reader` to `writer`, each chunk `delay` seconds after it came, in order."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while data := await reader.read(CHUNK):
                if from_client and not conn.client_spoke_last:
                    self.round_trips += 1
                conn.client_spoke_last = from_client
                queue.put_nowait((time.monotonic() + self.delay, data))
        finally:
            while not queue.empty() and not sender.done():
                await asyncio.sleep(0.001)
            sender.cancel()
