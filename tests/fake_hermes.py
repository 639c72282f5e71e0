"""A fake Hermes API server (the session routes of HERMES-DIALECT.md 2.3 and 2.7) for the engine's unit tests.

    with FakeHermes(key="k" * 16) as hermes:
        hermes.sessions["s1"] = {"title": "Bot Chat", "messages": []}
        ...; hermes.requests  # (method, path, body) received, in order

`mode` makes it misbehave: "nonsense" answers chats with an HTML page, "slow" never answers them, and
`rotate` names the id a chat moves its session to (as a compression does).

`approvals=True` makes it a Hermes that keeps runs (0.21 and later: `/v1/capabilities`, `/v1/runs` keyed by
`Idempotency-Key`, its events): each run waits for its person's approval of a dangerous command (`approval.request`,
`POST /v1/runs/{id}/approval`), then answers `ran it (<choice>)` or `refused it` (`approvals_given` records the
choices taken).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, kind: str = "application/json") -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {self.server.owner.key}":
            self._send(401, {"error": {"message": "Invalid API key", "code": "invalid_api_key"}})
            return False
        return True

    def do_GET(self) -> None:
        owner = self.server.owner
        owner.requests.append(("GET", self.path, None))
        path = self.path.split("?")[0]
        if path == "/health":
            self._send(200, {"status": "ok", "platform": "hermes-agent", "version": owner.version})
            return
        if not self._authorized():
            return
        if path == "/v1/capabilities":
            features: dict[str, Any] = {}
            if owner.approvals:
                features = {
                    "runs_idempotency": {"supported": True},
                    "run_stop": True,
                    "approval_events": True,
                    "run_approval_response": True,
                }
            self._send(200, {"object": "hermes.api_server.capabilities", "features": features})
        elif path.startswith("/v1/runs/") and path.endswith("/events"):
            self._run_events(path.split("/")[3])
        elif path.startswith("/v1/runs/"):
            run = owner.runs.get(path.split("/")[3])
            if run is None:
                self._send(404, {"error": {"message": "Run not found", "code": "run_not_found"}})
            else:
                self._send(200, {"object": "hermes.run", "run_id": path.split("/")[3], **run["status"]})
        elif path == "/api/sessions":
            data = [{"id": k, "title": v["title"]} for k, v in owner.sessions.items() if not v.get("child")]
            self._send(200, {"object": "list", "data": data, "has_more": False})
        elif path.startswith("/api/sessions/") and path.endswith("/messages"):
            sid = path.split("/")[3]
            if sid not in owner.sessions:
                self._send(404, {"error": {"message": f"Session not found: {sid}", "code": "session_not_found"}})
            else:
                tip = owner.sessions[sid].get("tip", sid)
                self._send(200, {"object": "list", "session_id": tip, "data": owner.sessions[tip]["messages"]})
        elif path.startswith("/api/sessions/") and path.count("/") == 3:
            sid = path.split("/")[3]
            if sid not in owner.sessions:
                self._send(404, {"error": {"message": f"Session not found: {sid}", "code": "session_not_found"}})
            else:
                source = owner.sessions[sid].get("source", "api_server")
                session = {"id": sid, "title": owner.sessions[sid]["title"], "source": source}
                self._send(200, {"object": "hermes.session", "session": session})
        else:
            self._send(404, "404: Not Found", "text/plain")

    def do_POST(self) -> None:
        owner = self.server.owner
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        owner.requests.append(("POST", self.path, body))
        owner.session_keys.append(self.headers.get("X-Hermes-Session-Key"))
        if not self._authorized():
            return
        if self.path == "/api/sessions":
            sid = body.get("id") or f"fake_{len(owner.sessions)}"
            if sid in owner.sessions:
                self._send(409, {"error": {"message": f"Session already exists: {sid}", "code": "session_exists"}})
                return
            owner.sessions[sid] = {"title": body.get("title"), "messages": []}
            self._send(201, {"object": "hermes.session", "session": {"id": sid, "title": body.get("title")}})
        elif self.path.startswith("/api/sessions/") and self.path.endswith("/chat/stream"):
            self._chat(self.path.split("/")[3], body["message"])
        elif self.path == "/v1/runs" and owner.approvals:
            key = self.headers.get("Idempotency-Key") or ""
            if key in owner.run_keys:
                self._send(202, {"run_id": owner.run_keys[key], "status": "running", "replayed": True})
                return
            run_id = f"run_fake{len(owner.runs)}"
            owner.run_keys[key] = run_id
            owner.runs[run_id] = {"status": {"status": "running"}, "answered": threading.Event(), "choice": None}
            self._send(202, {"run_id": run_id, "status": "running"})
        elif self.path.startswith("/v1/runs/") and self.path.endswith("/approval"):
            run = owner.runs.get(self.path.split("/")[3])
            if run is None or run["status"]["status"] != "waiting_for_approval":
                self._send(409, {"error": {"message": "Run has no pending approval", "code": "approval_not_pending"}})
                return
            run["choice"] = body.get("choice")
            owner.approvals_given.append(body.get("choice"))
            run["status"] = {"status": "running"}
            run["answered"].set()
            self._send(200, {"object": "hermes.run.approval_response", "choice": body.get("choice"), "resolved": 1})
        else:
            self._send(404, "404: Not Found", "text/plain")

    def _chat(self, sid: str, message: str) -> None:
        owner = self.server.owner
        if sid not in owner.sessions:
            self._send(404, {"error": {"message": f"Session not found: {sid}", "code": "session_not_found"}})
            return
        if owner.mode == "nonsense":
            self._send(200, "<html>not hermes</html>", "text/html")
            return
        if owner.mode == "slow":
            owner.stopping.wait(30)
            return
        if owner.mode == "held":  # the turn runs until the test lets it go
            owner.turn_started.set()
            owner.release.wait(30)
        reply = f"{owner.name} heard: {message.splitlines()[-1]}"
        tip = sid
        if owner.rotate:
            tip, owner.rotate = owner.rotate, None
            owner.sessions[sid]["tip"] = tip
            owner.sessions[sid]["child"] = True
            owner.sessions[tip] = {"title": owner.sessions[sid]["title"], "messages": []}
        owner.sessions[tip]["messages"] += [
            {"role": "user", "content": message},
            {"role": "assistant", "content": reply},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("X-Hermes-Session-Id", sid)
        self.send_header("Connection", "close")
        self.end_headers()
        events = [("run.started", {}), *[("assistant.delta", {"delta": w}) for w in reply.split(" ")]]
        events += [("assistant.completed", {"session_id": tip, "content": reply}), ("done", {})]
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps({'session_id': sid, **data})}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def _run_events(self, run_id: str) -> None:
        owner = self.server.owner
        run = owner.runs.get(run_id)
        if run is None:
            self._send(404, {"error": {"message": "Run not found", "code": "run_not_found"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(name: str, **data: Any) -> None:
            self.wfile.write(f"data: {json.dumps({'event': name, 'run_id': run_id, **data})}\n\n".encode())
            self.wfile.flush()

        approval = {
            "request_id": f"req_{run_id}",
            "command": "rm -rf /srv/cache",
            "description": "recursive delete",
            "choices": ["once", "session", "always", "deny"],
        }
        if run["choice"] is None:
            run["status"] = {"status": "waiting_for_approval", "approval": approval}
        event("approval.request", **approval)
        while not run["answered"].wait(0.1):
            if owner.stopping.is_set():
                return
            self.wfile.write(b": keepalive\n\n")
            self.wfile.flush()
        choice = run["choice"]
        event("approval.responded", choice=choice)
        output = f"refused it ({choice})" if choice == "deny" else f"ran it ({choice})"
        run["status"] = {"status": "completed", "output": output}
        event("message.delta", delta=output)
        event("run.completed", output=output)


class FakeHermes:
    def __init__(self, *, key: str, name: str = "fake hermes", mode: str = "", approvals: bool = False) -> None:
        self.key, self.name, self.mode = key, name, mode
        self.approvals = approvals
        self.runs: dict[str, dict[str, Any]] = {}
        self.run_keys: dict[str, str] = {}
        self.approvals_given: list[str | None] = []
        self.rotate: str | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.stopping = threading.Event()
        self.version = "0.19.0"  # what /health says
        self.session_keys: list[str | None] = []  # X-Hermes-Session-Key of each POST
        self.turn_started = threading.Event()  # mode "held": a turn began
        self.release = threading.Event()  # mode "held": lets it answer
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def chats(self) -> list[tuple[str, str]]:
        """(session id, message) of every chat request, in order."""
        return [(p.split("/")[3], b["message"]) for m, p, b in self.requests if p.endswith("/chat/stream")]

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
