"""A YAML config edited in place: read with ruamel.yaml's round trip (comments, key order and quoting kept),
changed, checked by the loader that will read it, and replaced atomically (a refused change leaves the file)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from ..errors import ConfigError, UsageError
from . import config, files

T = TypeVar("T")


def _yaml() -> YAML:
    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    return yaml


def edit(path: Path, change: Callable[[dict[str, Any]], T], *, check: Callable[[dict[str, Any]], object]) -> T:
    """Apply `change` to the mapping in `path` (an empty or missing file is an empty mapping), then `check` the
    result as plain data (a ConfigError there is a usage error: nothing is written), then write it."""
    yaml = _yaml()
    text = files.read_text(path, missing_ok=True)
    try:
        data = yaml.load(text) if text.strip() else None
    except YAMLError as exc:
        raise ConfigError(f"{str(path)!r}: {exc}") from exc
    if data is None:
        data = yaml.load("{}")
    if not isinstance(data, dict):
        raise ConfigError(f"{str(path)!r}: expected a mapping at the top, got {type(data).__name__}")
    result = change(data)
    out = io.StringIO()
    yaml.dump(data, out)
    try:
        check(config.load_yaml_text(out.getvalue(), path))
    except ConfigError as exc:
        raise UsageError(f"{exc.message} (nothing was changed)", code="invalid_config") from exc
    config.write_atomic(path, out.getvalue())
    return result
