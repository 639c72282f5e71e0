"""The config reference (docs/config.md), written from the models: one table per file, a row per key.

`python -m backchannel.home.reference` prints the tables; tests/test_config_reference.py checks that the
docs/config.md holds them as printed.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any, NamedTuple

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .home_file import HomeFile
from .profile_file import ProfileConfig
from .schema import fields_of, file_keys, section_model
from .values import Kind

FILES: dict[str, type[BaseModel]] = {"home": HomeFile, "profile": ProfileConfig}
TITLES = {"home": "The home's `config.yaml`", "profile": "A profile's `config.yaml`"}
HEADER = "| key | value | default | meaning |\n|---|---|---|---|"


class Row(NamedTuple):
    key: str
    value: str
    default: str
    meaning: str

    def markdown(self) -> str:
        cells = (f"`{self.key}`", self.value, self.default, self.meaning)
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def rows(kind: str) -> list[Row]:
    """The keys of the file `kind` (home or profile), each with what it holds, its default and its meaning."""
    return list(_rows(FILES[kind], ""))


def _rows(model: type[BaseModel], prefix: str) -> Iterator[Row]:
    for name, field in fields_of(model):
        keys = file_keys(name, field)
        key = prefix + keys[0]  # the first of its names; the others are in its description
        inner, named = section_model(field.annotation)
        meaning = field.description or ""
        if inner is not None:
            yield Row(key, "mapping of names" if named else "mapping", "", meaning)
            yield from _rows(inner, f"{key}.<name>." if named else f"{key}.")
        else:
            yield Row(key, _value(field), _default(field), meaning)


def _value(field: FieldInfo) -> str:
    kinds = [m.words for m in field.metadata if isinstance(m, Kind)]
    if kinds:
        return kinds[0]
    args = typing.get_args(field.annotation)
    if typing.get_origin(field.annotation) is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if field.annotation in (str, str | None):
        return "string"
    return str(field.annotation)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if not value and _value(field).startswith("mapping"):
        return "`{}`"
    return _text(value)


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, tuple | list | dict) and not value:
        return "`[]`" if not isinstance(value, dict) else "`{}`"
    return f"`{value}`" if value != "" else '`""`'


def table(kind: str) -> str:
    """The markdown table of the file `kind`."""
    return "\n".join([HEADER, *(row.markdown() for row in rows(kind))])


def main() -> None:
    for kind in FILES:
        print(f"### {TITLES[kind]}\n\n{table(kind)}\n")


if __name__ == "__main__":
    main()
