"""A real push notification receiver for the tests: an HTTP server on loopback that keeps every POST it gets;
and a gateway whose home has push settings, and a send that asks for pushes.

The receiver answers 200, or a failure (`fail_first` POSTs answered 500; `down`: every POST answered 503),
and lets a test wait for the notifications it expects instead of sleeping.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from backchannel.home import config
from conftest import GatewayProcess, free_port, run_cli, use_shared_store
from gateway_http import in_home

COMPLETED = "TASK_STATE_COMPLETED"


def pushing_gateway(root: Path, *, store_url: str | None = None, **a2a: Any) -> GatewayProcess:
    """A started gateway on a new home whose config.yaml has these `gateway.a2a` settings (and its store in the
    PostgreSQL database `store_url`, when given)."""
    return pushing_home(root, store_url=store_url, **a2a).start()


def pushing_home(root: Path, *, store_url: str | None = None, **a2a: Any) -> GatewayProcess:
    """`pushing_gateway`'s home, its gateway not started yet (its store not made yet)."""
    with in_home(root):
        assert run_cli("init").exit_code == 0
    if store_url is not None:
        use_shared_store(root, store_url)
    gw = GatewayProcess(root, free_port())
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"].update(port=gw.port, a2a=a2a)
    config.write_yaml(path, data)
    return gw


def sent_with_push(text: str, message_id: str, push: dict[str, Any], **configuration: Any) -> dict[str, Any]:
    """SendMessage's params: a text message and a configuration with this push config (and more)."""
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"message": message, "configuration": {"taskPushNotificationConfig": push, **configuration}}


@dataclass(frozen=True)
class Post:
    """One POST as the receiver got it, and what it answered."""

    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    status: int

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    @property
    def id(self) -> str:
        return self.headers.get("x-a2a-notification-id", "")

    @property
    def kind(self) -> str:
        """`statusUpdate`, `artifactUpdate`, `task` or `message`: the StreamResponse member it carries."""
        (member,) = self.json
        return member

    @property
    def state(self) -> str | None:
        update = self.json.get("statusUpdate")
        return None if update is None else str(update["status"]["state"])


class Receiver:
    def __init__(self, *, fail_first: int = 0, port: int | None = None) -> None:
        self.fail_first = fail_first
        self.down = False
        self.posts: list[Post] = []
        self._changed = threading.Condition()
        self.port = port or free_port()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._changed:
                    if receiver.down:
                        status = 503
                    elif receiver.fail_first > 0:
                        receiver.fail_first -= 1
                        status = 500
                    else:
                        status = 200
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.posts.append(Post(self.path, headers, body, status))
                    receiver._changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def delivered(self) -> list[Post]:
        """The POSTs answered 200, in the order they came."""
        with self._changed:
            return [p for p in self.posts if p.status == 200]

    def wait_for(self, done: Callable[[list[Post]], bool], *, within: float = 30.0) -> list[Post]:
        """The delivered POSTs once `done` holds of them (they are returned as they are when time runs out)."""
        deadline = time.monotonic() + within
        with self._changed:
            while True:
                delivered = [p for p in self.posts if p.status == 200]
                remaining = deadline - time.monotonic()
                if done(delivered) or remaining <= 0:
                    return delivered
                self._changed.wait(remaining)

    def until_state(self, state: str, *, within: float = 30.0) -> list[Post]:
        """The delivered POSTs once one of them tells `state` (TASK_STATE_COMPLETED …)."""
        return self.wait_for(lambda posts: any(p.state == state for p in posts), within=within)
