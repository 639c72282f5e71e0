"""The keys each config file may hold, read off its model: what loading warns about and what `doctor` checks.

A file's keys are a tree of names (a leaf is None; `NAMES` stands for any name, as under `peers:`),
derived from its pydantic model (`home_file.HomeFile`, `profile_file.ProfileConfig`) by the fields' names
in the file. An unknown key is warned about (with the closest valid one) and left out before the model
checks the values. A profile folder copied from a Hermes home carries Hermes Agent's keys: Backchannel
ignores them on purpose (docs/config.md says so), so loading never warns about them and `doctor` lists them
as ignored, not as mistakes.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError

if TYPE_CHECKING:  # pydantic is imported with the models, when a file is read: not by a CLI that only logs
    from pydantic import BaseModel, ValidationError
    from pydantic.fields import FieldInfo

Tree = Mapping[str, "Tree | None"]
NAMES = "*"  # any name: the entries of a mapping of names (peers)

log = logging.getLogger("backchannel.config")


def file_keys(name: str, field: FieldInfo) -> tuple[str, ...]:
    """The names a field goes by in the file: its alias (or its choices of aliases), else its own name."""
    from pydantic import AliasChoices

    if isinstance(field.validation_alias, AliasChoices):
        return tuple(str(choice) for choice in field.validation_alias.choices)
    return (field.alias or name,)


def fields_of(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    """The fields of `model` that a file holds (a field filled in from elsewhere is `exclude`d), in order."""
    return [(name, field) for name, field in model.model_fields.items() if not field.exclude]


def section_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's value is (or, for a mapping of names, each entry is), and whether it is such a mapping."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and _is_model(a)]
        return (models[0] if models else None), False
    if origin is dict:
        entry = typing.get_args(annotation)[1]
        inner, _ = section_model(entry)
        return inner, True
    if isinstance(annotation, type) and _is_model(annotation):
        return annotation, False
    return None, False


def _is_model(annotation: type) -> bool:
    from pydantic import BaseModel

    return issubclass(annotation, BaseModel)


def tree_of(model: type[BaseModel]) -> Tree:
    """The keys a file (or section) of `model` may hold."""
    tree: dict[str, Tree | None] = {}
    for name, field in fields_of(model):
        inner, named = section_model(field.annotation)
        child = None if inner is None else ({NAMES: tree_of(inner)} if named else tree_of(inner))
        tree.update(dict.fromkeys(file_keys(name, field), child))
    return tree


@functools.cache
def tree(kind: FileKind) -> Tree:
    """The keys of the home's config.yaml (`home`) or of a profile's (`profile`), from the file's model."""
    from .home_file import HomeFile
    from .profile_file import ProfileConfig

    return tree_of(HomeFile if kind == "home" else ProfileConfig)


# Hermes Agent 0.19's own config keys (hermes_cli/config.py DEFAULT_CONFIG and the model section it reads):
# a profile copied from a Hermes home holds them, and Backchannel ignores them without a warning.
_HERMES_TOP = (  # noqa: SIM905 (a list of words reads better as words)
    "providers fallback_providers fallback_model custom_providers credential_pool_strategies toolsets "
    "platform_toolsets max_concurrent_sessions max_live_sessions terminal web browser checkpoints "
    "context_file_max_chars file_read_max_chars mcp_discovery_timeout mcp tool_output "
    "tool_loop_guardrails compression kanban prompt_caching openrouter bedrock auxiliary display "
    "dashboard privacy tts stt voice human_delay context memory delegation prefill_messages_file goals "
    "moa skills curator honcho timezone slack discord whatsapp telegram mattermost matrix approvals "
    "command_allowlist quick_commands platform_hints hooks hooks_auto_accept personalities security cron "
    "code_execution tools logging model_catalog network gateway streaming sessions onboarding updates "
    "lsp x_search secrets paste_collapse_threshold paste_collapse_threshold_fallback "
    "paste_collapse_char_threshold computer_use desktop vertex plugins bot_peers smart_model_routing "
    "session_reset group_sessions_per_user _config_version"
).split()
_HERMES_MODEL = (  # noqa: SIM905 (a list of words reads better as words)
    "provider api_key api_mode name context_length max_tokens entra auth_mode openai_runtime "
    "supports_vision persist_switch_by_default ollama_num_ctx api"
).split()
_HERMES_AGENT = (  # noqa: SIM905 (a list of words reads better as words)
    "gateway_timeout restart_drain_timeout api_max_retries service_tier tool_use_enforcement "
    "intent_ack_continuation task_completion_guidance parallel_tool_call_guidance environment_probe "
    "environment_hint coding_context coding_instructions verify_guidance max_verify_nudges "
    "verify_on_stop gateway_timeout_warning clarify_timeout gateway_notify_interval "
    "gateway_auto_continue_freshness local_stream_stale_timeout image_input_mode disabled_toolsets "
    "reasoning_overrides"
).split()
HERMES_PROFILE: Tree = {
    **dict.fromkeys(_HERMES_TOP),
    "model": dict.fromkeys(_HERMES_MODEL),
    "agent": dict.fromkeys(_HERMES_AGENT),
}

FileKind = Literal["home", "profile"]
_HERMES: dict[FileKind, Tree] = {"home": {}, "profile": HERMES_PROFILE}


@dataclass(frozen=True)
class StrayKey:
    """A key of a config file that Backchannel does not read: a mistake, or a Hermes key ignored on purpose."""

    path: Path
    key: str  # dotted: agent.session_messaging.alow
    closest: str | None  # the dotted valid key it is most likely meant to be
    hermes: bool  # a Hermes Agent key: ignored on purpose

    @property
    def what(self) -> str:
        if self.hermes:
            return f"{self.key!r} is a Hermes Agent key; Backchannel ignores it"
        hint = f" (did you mean {self.closest!r}?)" if self.closest else ""
        return f"unknown key {self.key!r}{hint}; it is ignored"


def stray_keys(data: Mapping[str, Any], kind: FileKind, path: Path) -> list[StrayKey]:
    """Every key of `data` (a parsed config file of `kind`) that is not in its schema, in file order."""
    ours, hermes = tree(kind), _HERMES[kind]
    found: list[StrayKey] = []
    _walk(data, ours, hermes, (), ours, path, found)
    return found


def _walk(
    data: Mapping[str, Any],
    ours: Tree | None,
    hermes: Tree | None,
    prefix: tuple[str, ...],
    root: Tree,
    path: Path,
    found: list[StrayKey],
) -> None:
    for raw_key, value in data.items():
        key = str(raw_key)
        dotted = ".".join((*prefix, key))
        if ours is not None and (key in ours or NAMES in ours):
            child = ours.get(key, ours.get(NAMES))
            if isinstance(value, Mapping) and child is not None:
                sub_hermes = hermes.get(key) if hermes is not None else None
                _walk(value, child, sub_hermes, (*prefix, key), root, path, found)
        elif hermes is not None and key in hermes:  # ignored on purpose, all of it, whatever it holds
            found.append(StrayKey(path, dotted, None, hermes=True))
        else:
            found.append(StrayKey(path, dotted, _closest(key, ours, prefix, root), hermes=False))


def _closest(key: str, siblings: Tree | None, prefix: tuple[str, ...], root: Tree) -> str | None:
    """The valid key `key` is most likely meant to be: a close sibling, else the same name elsewhere in the file."""
    names = [k for k in (siblings or {}) if k != NAMES]
    match = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if match:
        return ".".join((*prefix, match[0]))
    everywhere = list(_paths(root, ()))
    same = [p for p in everywhere if p.rsplit(".", 1)[-1] == key]
    if same:
        return same[0]
    match = difflib.get_close_matches(key, [p.rsplit(".", 1)[-1] for p in everywhere], n=1, cutoff=0.75)
    return next((p for p in everywhere if match and p.rsplit(".", 1)[-1] == match[0]), None)


def _paths(tree: Tree, prefix: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for key, child in tree.items():
        if key == NAMES:
            continue
        dotted = (*prefix, key)
        out.append(".".join(dotted))
        if child is not None:
            out.extend(_paths(child, dotted))
    return out


_warned: set[tuple[str, int, int, str]] = set()


def warn_stray(data: Mapping[str, Any], kind: FileKind, path: Path) -> None:
    """Log a warning for each unknown key of a file being loaded, once per key and version of the file.

    Hermes keys are not logged: they are ignored on purpose, and a Hermes profile would warn on every load."""
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (0, 0)
    for stray in stray_keys(data, kind, path):
        seen = (str(path), *stamp, stray.key)
        if stray.hermes or seen in _warned:
            continue
        _warned.add(seen)
        log.warning("%s: %s", str(path), stray.what)


def known(data: Mapping[str, Any], kind: FileKind) -> dict[str, Any]:
    """`data` without the keys its file does not hold (they are warned about, or Hermes keys): what is checked."""
    return _known(data, tree(kind))


def _known(data: Mapping[str, Any], ours: Tree) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if str(key) not in ours and NAMES not in ours:
            continue
        child = ours.get(str(key), ours.get(NAMES))
        kept[key] = _known(value, child) if isinstance(value, Mapping) and child is not None else value
    return kept


def refusal(exc: ValidationError, data: Mapping[str, Any], kind: FileKind, path: Path) -> ConfigError:
    """The error of a file whose values do not check, with the unknown keys it holds: a misspelt key is often
    why a value is missing (`comand:` leaves a server with neither `command` nor `url`)."""
    from .values import config_error

    error = config_error(exc, path)
    strays = [s for s in stray_keys(data, kind, path) if not s.hermes]
    if not strays:
        return error
    return ConfigError(f"{error.message}; {'; '.join(s.what for s in strays)}")
