"""The value types the config files hold, the base of their models, and how a value's error reads.

Each config file is one pydantic model (`home_file.HomeFile`, `profile_file.ProfileConfig`); the types
here carry their own check and message (`must be a positive integer, got 'x'`) and a `Kind`, the words
the config reference (docs/config.md) uses for them. `config_error` turns a `ValidationError` into one
`ConfigError` naming the file, the key's dotted path and the problem: never pydantic's own dump.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from ..errors import ConfigError


class Frozen(BaseModel):
    """A config section: frozen, unknown keys refused (the loaders strip and warn about them first), read by
    its keys' names in the file (aliases) and by its attributes' names in code."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)


@dataclass(frozen=True)
class Kind:
    """What a value is, in the config reference's words: `positive integer`, `true or false`, `list of patterns`."""

    words: str


def _check(test: Callable[[Any], bool], words: str) -> BeforeValidator:
    def check(value: Any) -> Any:
        if not test(value):
            raise ValueError(f"must be {_article(words)}, got {value!r}")
        return value

    return BeforeValidator(check)


def _article(words: str) -> str:
    return words if words.startswith(("true", "one of")) else ("an " if words[0] in "aeiou" else "a ") + words


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def at_least(least: int) -> BeforeValidator:
    """The check of an integer of at least `least` (no true/false, no text, no fraction)."""
    return _check(lambda v: _is_int(v) and v >= least, _int_words(least))


def _int_words(least: int) -> str:
    return {0: "non-negative integer", 1: "positive integer"}.get(least, f"integer of at least {least}")


def number_check(*, positive: bool, seconds: bool = False) -> BeforeValidator:
    """The check of a number (an integer or a decimal, never true/false), non-negative or positive."""
    return _check(lambda v: _is_number(v) and (v > 0 if positive else v >= 0), _number_words(positive, seconds))


def _number_words(positive: bool, seconds: bool = False) -> str:
    return ("positive" if positive else "non-negative") + " number" + (" of seconds" if seconds else "")


Count = Annotated[int, at_least(0), Kind(_int_words(0))]
PositiveCount = Annotated[int, at_least(1), Kind(_int_words(1))]
Number = Annotated[float, number_check(positive=False), Kind(_number_words(False))]
Seconds = Annotated[float, number_check(positive=True, seconds=True), Kind(_number_words(True, True))]
# A limit that may be left out (None: no limit).
Limit = Annotated[
    int | None, _check(lambda v: v is None or (_is_int(v) and v >= 0), _int_words(0)), Kind(_int_words(0))
]
AmountLimit = Annotated[
    float | None,
    _check(lambda v: v is None or (_is_number(v) and v >= 0), _number_words(False)),
    Kind(_number_words(False)),
]
Flag = Annotated[bool, _check(lambda v: isinstance(v, bool), "true or false"), Kind("true or false")]
Text = Annotated[str, _check(lambda v: isinstance(v, str), "string"), Kind("string")]
OptionalText = Annotated[str | None, Kind("string")]
# A name or a note read as text even when YAML made it a number (`note: 7`, `default: 3.5`).
Words = Annotated[Text, BeforeValidator(lambda v: str(v) if _is_number(v) else v)]


def one_of(*choices: str) -> BeforeValidator:
    """The check of a value that is one of `choices` (the config reference names them from the field's Literal type)."""
    text = ", ".join(choices)
    return _check(lambda v: v in choices, f"one of {text}")


class KeyProblem(ValueError):
    """A problem a section's check finds with one of its keys: the message names that key, not the section."""

    def __init__(self, key: str, problem: str, *, joint: str = " ") -> None:
        super().__init__(f"{key}{joint}{problem}")
        self.key, self.problem, self.joint = key, problem, joint


def config_error(exc: ValidationError, path: Path, prefix: tuple[str | int, ...] = ()) -> ConfigError:
    """The first problem of a file's validation, naming the file, the key's line and the key: `'…/config.yaml'
    line 3: gateway.port must be a positive integer, got 'x'` (the others show once it is fixed)."""
    from .lines import line_of

    error = exc.errors(include_url=False)[0]
    loc: tuple[str | int, ...] = (*prefix, *error["loc"])
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, KeyProblem):
        loc = (*loc, cause.key)
    line = line_of(path, loc) if loc else None
    named = f"{str(path)!r}" + (f" line {line}" if line is not None else "")
    if isinstance(cause, KeyProblem):
        return ConfigError(f"{named}: {dotted(loc)}{cause.joint}{cause.problem}")
    where = dotted(loc)
    problem = _problem(error)
    if not where:
        return ConfigError(f"{named}: {problem}")
    joint = " " if problem.startswith(("must ", "needs ", "is ")) else ": "
    return ConfigError(f"{named}: {where}{joint}{problem}")


def dotted(loc: tuple[str | int, ...]) -> str:
    """A key's path as the config reference writes it: `mcp_servers.files.args[0]`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


_TYPE_WORDS = {
    "dict_type": "mapping",
    "model_type": "mapping",
    "model_attributes_type": "mapping",
    "list_type": "list",
    "tuple_type": "list",
    "string_type": "string",
    "bool_type": "true or false",
    "int_type": "integer",
    "float_type": "number",
}


def _problem(error: Mapping[str, Any]) -> str:
    kind, value = error["type"], error.get("input")
    if kind == "value_error":
        return str(error["ctx"]["error"])
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a key of this file"
    if kind in _TYPE_WORDS:
        return f"must be {_article(_TYPE_WORDS[kind])}, got {value!r}"
    return f"{error['msg'][:1].lower()}{error['msg'][1:]}, got {value!r}"
