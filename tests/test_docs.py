"""The README is a short path and the documentation site (docs/, mkdocs.yml) holds the rest: every relative link in
README.md and docs/*.md reaches a file that exists and, when it names one, a heading of it; the README is at most
300 lines; each of its shell blocks for Linux and macOS has its cmd and PowerShell forms, or is said to be the
same in all three and is written so that it is; and every page is in the site's navigation. `make docs` builds
the site with `mkdocs build --strict`, which checks the pages' links again as MkDocs resolves them."""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick  # pure: files only (make quick)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
README_MAX_LINES = 300
SAME_EVERYWHERE = "the same in cmd and PowerShell"

FENCE = re.compile(r"^(`{3,})(.*)$")
LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """`text` without its fenced blocks and inline code, where links are only text."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs makes it (Python-Markdown's toc) and GitHub too for these headings."""
    text = re.sub(r"[`*]", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(match.group(1)))
    return found


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_its_heading(path: Path) -> None:
    found = links(path)
    broken = []
    for target in found:
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # http:, https:, mailto: …: not a file of this repository
        name, _, anchor = target.partition("#")
        file = (path.parent / name).resolve() if name else path
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: {file.name} has no heading #{anchor}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_links_into_the_docs() -> None:
    into_docs = {t.partition("#")[0] for t in links(README) if t.startswith("docs/")}
    assert {"docs/index.md", "docs/install.md", "docs/windows.md", "docs/hermes.md", "docs/cli.md"} <= into_docs


def test_the_readme_is_at_most_300_lines() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines: move the rest into docs/"


def blocks(text: str) -> list[tuple[str, list[str], str]]:
    """Each fenced block of `text` and each heading, in order: (language, its lines, the paragraph before it);
    a heading is ("#", [], "")."""
    found: list[tuple[str, list[str], str]] = []
    lines = text.splitlines()
    i, before, paragraph_ended = 0, "", True
    while i < len(lines):
        line = lines[i]
        match = FENCE.match(line)
        if match:
            language = match.group(2).strip().split(" ")[0]
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith(match.group(1)):
                body.append(lines[i])
                i += 1
            found.append((language, body, before))
        elif re.match(r"#{1,6} ", line):
            found.append(("#", [], ""))
            before, paragraph_ended = "", True
        elif not line.strip():
            paragraph_ended = True
        else:
            before = line if paragraph_ended else f"{before} {line}"
            paragraph_ended = False
        i += 1
    return found


def portable(line: str) -> bool:
    """A command line cmd, PowerShell and a POSIX shell all read alike: plain words (letters, digits, `_ - . / :
    = ,`) and double-quoted strings with nothing a shell expands in them (`$`, `%`, a backtick); no comment, no
    single quotes (cmd keeps them), no `~`, globs, pipes, redirections or `@` outside the quotes."""
    outside = re.sub(r'"[^"$%`]*"', " ", line)
    return '"' not in outside and re.fullmatch(r"[A-Za-z0-9_\-./:=, ]*", outside) is not None


def test_each_shell_block_of_the_readme_has_its_cmd_and_powershell_forms() -> None:
    found = blocks(README.read_text(encoding="utf-8"))
    shells = [i for i, (language, _, _) in enumerate(found) if language in ("sh", "bash", "shell", "console")]
    assert len(shells) >= 5
    problems = []
    for i in shells:
        _, body, before = found[i]
        following = []
        for language, _, _ in found[i + 1 :]:
            if language in ("sh", "bash", "shell", "console", "#"):
                break
            following.append(language)
        if "bat" in following and "powershell" in following:
            continue
        if SAME_EVERYWHERE.lower() in before.lower():
            unlike = [line for line in body if not portable(line)]
            if unlike:
                problems.append(f"said to be {SAME_EVERYWHERE}, but is not: {unlike}")
            continue
        problems.append(f"no cmd and PowerShell forms after: {body}")
    assert not problems, problems


def test_the_windows_forms_of_the_readme_are_windows_commands() -> None:
    for language, body, _ in blocks(README.read_text(encoding="utf-8")):
        if language in ("bat", "powershell"):
            text = "\n".join(body)
            assert ".venv/" not in text and "~/" not in text, f"a {language} block with a POSIX path: {body}"
            assert not re.search(r"^\s*\. |\bexport |\$\(", text, re.M), f"a {language} block in sh: {body}"


def test_the_portable_check_tells_the_shells_apart() -> None:
    assert portable('backchannel send builds "is the build green?"')
    assert portable("backchannel profile allow research builds")
    assert not portable("backchannel profile allow research builds 'peer:spark/*'")  # cmd keeps the quotes
    assert not portable("backchannel ledger --since 2h   # a comment")  # cmd has no comments
    assert not portable('backchannel send builds "price $PRICE"')  # PowerShell and sh expand it
    assert not portable('backchannel send builds "%PATH%"')  # cmd expands it
    assert not portable("backchannel send builds - < question.txt")  # PowerShell has no <
    assert not portable("backchannel mcp --home ~/.backchannel --as research")
    assert not portable('backchannel send research "@session:builds hi" | jq .')


def test_every_page_is_in_the_sites_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    navigated = set(re.findall(r":\s*([\w./-]+\.md)\s*$", config, re.M))
    assert navigated == {p.name for p in PAGES}


def test_the_page_of_every_operation_is_what_the_gateway_declares() -> None:
    """docs/api-operations.md is written by scripts/api_reference.py from `api.surface.OPERATIONS`."""
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "scripts" / "api_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = (DOCS / "api-operations.md").read_text(encoding="utf-8")
    assert written == module.page(), "run `python scripts/api_reference.py --write`"
