"""The config reference (docs/config.md, moved there from the README) is the config models: each file's table
lists every key the file's model reads, with its kind and its default, and nothing else (`python -m
backchannel.home.reference` writes it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backchannel.home import reference, schema
from backchannel.home.home_file import GatewaySettings
from backchannel.home.profile_file import ProfileConfig

REFERENCE = (Path(__file__).resolve().parent.parent / "docs" / "config.md").read_text(encoding="utf-8")


def table_lines(title: str) -> list[str]:
    rest = REFERENCE.split(f"## {title}\n", 1)[1].lstrip("\n")
    lines = []
    for line in rest.splitlines():
        if not line.startswith("|"):
            break
        lines.append(line)
    return lines


@pytest.mark.parametrize("kind", ["home", "profile"])
def test_the_docs_table_of_each_config_file_is_the_one_its_model_gives(kind: str) -> None:
    written = table_lines(reference.TITLES[kind])
    expected = reference.table(kind).splitlines()
    assert written == expected, "run `python -m backchannel.home.reference` and paste its tables into docs/config.md"


@pytest.mark.parametrize("kind", ["home", "profile"])
def test_the_reference_lists_every_key_loading_accepts(kind: schema.FileKind) -> None:
    listed = {row.key for row in reference.rows(kind)}

    def keys(tree: schema.Tree, prefix: str) -> set[str]:
        found = set()
        for key, child in tree.items():
            dotted = prefix + ("<name>" if key == schema.NAMES else key)
            if key != schema.NAMES:
                found.add(dotted)
            if child is not None:
                found |= keys(child, dotted + ".")
        return found

    accepted = keys(schema.tree(kind), "")
    assert accepted - listed <= {"model.model"}  # Hermes' older spelling of model.default, said in its row
    assert listed <= accepted


def test_the_reference_shows_the_models_defaults() -> None:
    rows = {row.key: row for row in reference.rows("home") + reference.rows("profile")}
    assert rows["gateway.port"].default == f"`{GatewaySettings().port}`"
    assert rows["agent.max_turns"].default == f"`{ProfileConfig().max_turns}`"
    assert rows["agent.session_messaging.accept"].default == "none"
    assert rows["peers.<name>.url"].default == "required"
