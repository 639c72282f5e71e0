"""Architecture rules import-linter cannot say, checked over the source's syntax trees (`ast`, nothing imported):

- the surfaces reach a gateway through its named facades (`core.facades`) and its own life, never through the
  composition root's services (`gateway.delivery`, `ctx.gateway.rooms` …);
- only the pure modules define run, session and event types (others named so are listed, each with why);
- one module dispatches on address kinds: `isinstance(x, <an address class>)` (or a `case` of one) appears only
  in the door (`core/delivery/door.py`) and in `addresses.py`; everyone else asks addresses.py (`as_local`,
  `as_remote`, `as_group`) or the door (`by_kind`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "backchannel"

# What a surface may read of a Gateway: its facades, and its own life (what it is, how it starts and stops).
FACADES = {"messages", "roster", "keys", "admin", "hosting"}
OWN_LIFE = {"root", "settings", "shared", "running_turns", "open", "start", "stop", "aclose"}
SURFACE_PACKAGES = ("api", "mcpserver", "doctor")  # and any module outside core/ that imports from core

PURE_TYPE_MODULES = {"records.py", "events.py", "dialect.py"}
# Classes named like a run, a session or an event that are something else, each kept where it is.
NAMED_ALIKE = {
    ("outcome.py", "Run"),  # what a run says of itself as a client reads it (a peer's or a gateway's answer)
    ("net/sse.py", "Event"),  # one server-sent event as the wire dispatches it (a frame, not a run event)
    ("net/hermes.py", "HermesSession"),  # a Hermes gateway's own session, as its API lists it
    ("api/web/auth.py", "WebSession"),  # a logged-in browser (its cookie and CSRF token), not an agent's session
    ("store/push.py", "Event"),  # a push notification queued for a config (the outbox's row)
    ("store/runs.py", "NewRun"),  # the fields a run is recorded with (the store's insert)
}
RUN_TYPE_SUFFIXES = ("Run", "Session", "Event")

DISPATCHERS = {"addresses.py", "core/delivery/door.py"}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imports_core(name: str, tree: ast.Module) -> bool:
    depth = name.count("/")  # the dots a relative import climbs to reach the package's root
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if (node.level == depth + 1 and module.split(".")[0] == "core") or module.startswith("backchannel.core"):
                return True
        elif isinstance(node, ast.Import) and any(a.name.startswith("backchannel.core") for a in node.names):
            return True
    return False


def _is_surface(name: str, tree: ast.Module) -> bool:
    if name.startswith("core/"):
        return False
    return name.split("/")[0] in SURFACE_PACKAGES or _imports_core(name, tree)


def gateway_reads(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Each `gateway.<name>` and `<anything>.gateway.<name>` (or `_gateway`) read in a module: its line, the name."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        held = node.value
        if (isinstance(held, ast.Name) and held.id in ("gateway", "_gateway")) or (
            isinstance(held, ast.Attribute) and held.attr in ("gateway", "_gateway")
        ):
            yield node.lineno, node.attr


def services_read(tree: ast.Module) -> list[str]:
    read = sorted((line, name) for line, name in gateway_reads(tree) if name not in FACADES | OWN_LIFE)
    return [f"{line}: gateway.{name}" for line, name in read]


def named_like_runs(tree: ast.Module) -> list[str]:
    return [
        node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name.endswith(RUN_TYPE_SUFFIXES)
    ]


def address_classes() -> set[str]:
    tree = ast.parse((SRC / "addresses.py").read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef) and node.name.endswith("Address")}


def kind_checks(tree: ast.Module, kinds: set[str]) -> list[str]:
    """Each `isinstance(x, K)` and `case K(...)` with K an address class (by name, or `addresses.K`)."""

    def names(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
            n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
        }

    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            if len(node.args) == 2 and names(node.args[1]) & kinds:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchClass) and names(node.cls) & kinds:
            found.append((node.lineno, f"case {ast.unparse(node)}"))
    return [f"{line}: {said}" for line, said in sorted(found)]


def test_the_surfaces_reach_a_gateway_through_its_facades() -> None:
    offenders = {name: found for name, tree in _modules() if _is_surface(name, tree) and (found := services_read(tree))}
    assert offenders == {}, (
        "a surface reads a service of the composition root; reach it through a facade of core/facades.py"
        f" (gateway.{', gateway.'.join(sorted(FACADES))}) or add the call to the facade that does that job"
    )


def test_the_facades_are_the_gateways() -> None:
    """Each facade allowed here is built by the composition root (no name kept that stopped being one)."""
    tree = ast.parse((SRC / "core" / "gateway.py").read_text(encoding="utf-8"))
    built = {
        target.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id in ("Messages", "Roster", "Keys", "Admin", "Hosting")
        for target in node.targets
        if isinstance(target, ast.Attribute)
    }
    assert built == FACADES


def test_the_check_sees_a_service_read() -> None:
    tree = ast.parse(
        "async def f(request):\n    ctx = context(request)\n    await ctx.gateway.rooms.every()\n"
        "    gateway.delivery.run('x')\n    ctx.gateway.messages.run('x')\n    gateway.root\n"
    )
    assert services_read(tree) == ["3: gateway.rooms", "4: gateway.delivery"]


def test_only_the_pure_modules_define_run_session_and_event_types() -> None:
    offenders = {
        (name, cls) for name, tree in _modules() if name not in PURE_TYPE_MODULES for cls in named_like_runs(tree)
    }
    assert offenders - NAMED_ALIKE == set(), (
        "a run, session or event type belongs in records.py, events.py or dialect.py"
    )
    assert NAMED_ALIKE - offenders == set(), "an exception listed here is gone: take it off the list"


def test_the_check_sees_a_run_type() -> None:
    tree = ast.parse("class LocalRun:\n    pass\nclass Session(dict):\n    pass\nclass Running:\n    pass\n")
    assert named_like_runs(tree) == ["LocalRun", "Session"]


def test_one_module_dispatches_on_address_kinds() -> None:
    kinds = address_classes()
    assert kinds == {"LocalAddress", "RemoteAddress", "GroupAddress"}
    offenders = {
        name: found for name, tree in _modules() if name not in DISPATCHERS and (found := kind_checks(tree, kinds))
    }
    assert offenders == {}, (
        "only the door (core/delivery/door.py, `by_kind`) dispatches on an address's kind; to read one kind,"
        " use addresses.as_local / as_remote / as_group"
    )


def test_the_check_sees_a_kind_dispatch() -> None:
    tree = ast.parse(
        "def f(to):\n    if isinstance(to, addresses.RemoteAddress):\n        pass\n    match to:\n"
        "        case GroupAddress(name=n):\n            pass\n    isinstance(to, str)\n"
    )
    assert kind_checks(tree, {"LocalAddress", "RemoteAddress", "GroupAddress"}) == [
        "2: isinstance(to, addresses.RemoteAddress)",
        "5: case GroupAddress(name=n)",
    ]
