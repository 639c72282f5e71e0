"""Misbehaving network neighbours for the fault tests: a server that accepts and never answers, one that
answers every request with the same raw bytes and closes, and a proxy in front of a real gateway that
forwards a request and drops its answer."""

from __future__ import annotations

import socket
import threading
from typing import Self

import httpx


class _Listener:
    """A loopback server socket whose connections a thread hands to `_accept`, until the `with` ends."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self._server.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._accept(conn)

    def _accept(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()


def read_request(conn: socket.socket) -> tuple[list[str], bytes] | None:
    """One HTTP request off `conn`: its head's lines and its body (by Content-Length); None if it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return lines, body


class SilentPeer(_Listener):
    """Accepts every connection, reads what comes, never writes a byte (a hung peer, model endpoint or push
    receiver)."""

    def __init__(self) -> None:
        super().__init__()
        self.connections = 0
        self._held: list[socket.socket] = []
        self._changed = threading.Condition()

    def _accept(self, conn: socket.socket) -> None:
        with self._changed:
            self.connections += 1
            self._held.append(conn)  # kept open, never answered
            self._changed.notify_all()

    def wait_for_connections(self, count: int, *, within: float = 30.0) -> int:
        """The connections accepted so far, once there are `count` (or when time runs out)."""
        with self._changed:
            self._changed.wait_for(lambda: self.connections >= count, timeout=within)
            return self.connections

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        for conn in self._held:
            conn.close()


class CuttingProxy(_Listener):
    """Forwards HTTP requests to `target`; the answers to the first `cut` chat POSTs are read and dropped
    (the connection closes with no answer): the request arrived, its sender never learns what came of it."""

    def __init__(self, target: str, *, cut: int = 1, path_part: str = "/chat") -> None:
        super().__init__()
        self.target = target.rstrip("/")
        self.cut = cut
        self.path_part = path_part
        self.chats = 0  # chat POSTs seen
        self._client = httpx.Client(timeout=httpx.Timeout(60.0), trust_env=False)

    def _accept(self, conn: socket.socket) -> None:
        threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(60)
            request = read_request(conn)
            if request is None:
                return
            lines, body = request
            method, path, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            forwarded = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection", "content-length")}
            try:
                answer = self._client.request(method, self.target + path, headers=forwarded, content=body)
            except httpx.HTTPError:
                return  # the target is down: the connection closes unanswered
            if method == "POST" and self.path_part in path:
                self.chats += 1
                if self.chats <= self.cut:
                    return  # it ran over there; its answer is dropped here
            kind = answer.headers.get("content-type", "application/json")
            out = (
                f"HTTP/1.1 {answer.status_code} {answer.reason_phrase}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(answer.content)}\r\nConnection: close\r\n\r\n"
            ).encode() + answer.content
            conn.sendall(out)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._client.close()


class RawServer(_Listener):
    """Reads each request, answers it with `answer` (raw bytes, headers included) and closes the connection."""

    def __init__(self, answer: bytes) -> None:
        super().__init__()
        self.answer = answer
        self.requests = 0

    def _accept(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                read_request(conn)  # whatever it was, complete or not, the answer is the same
                self.requests += 1
                conn.sendall(self.answer)
            except OSError:
                return
