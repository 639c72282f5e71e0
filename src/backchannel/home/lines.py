"""Where a key is in a YAML file: the line a config error names, found again from the key's path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from ..errors import ConfigError
from . import files


def line_of(path: Path, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest key of `loc` that the file has (a key's parent when the key is not written
    there); None when the file cannot be read or parsed, or holds none of it."""
    try:
        node = yaml.compose(files.read_text(path, missing_ok=True) or "")
    except (ConfigError, yaml.YAMLError):
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pairs = node.value
            found = next((kv for kv in pairs if isinstance(kv[0], yaml.ScalarNode) and kv[0].value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            found = (node.value[part], node.value[part])
        else:
            found = None
        if found is None:
            break
        line = found[0].start_mark.line + 1
        node = found[1]
    return line
