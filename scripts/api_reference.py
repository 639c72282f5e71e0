"""docs/api-operations.md, the HTTP API's operations as the gateway declares them (`api.surface.OPERATIONS`, from
which /openapi.json is generated too): a row per operation, with who may call it, what it does and its statuses.

    python scripts/api_reference.py           # print the page
    python scripts/api_reference.py --write   # write it into docs/api-operations.md

tests/test_docs.py checks that the page is what this prints, so it never says what the gateway does not serve.
"""

from __future__ import annotations

import sys
from pathlib import Path

from backchannel.api.surface import OPERATIONS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "api-operations.md"

WHO = {
    "public": "anyone (no key)",
    "profile": "a key that reaches the profile",
    "run": "a key that reaches the run's profile",
    "person": "the person's key only",
    "agent": "the session's agent key, or the person's",
    "home": "any key (the route answers for the caller)",
}

HEAD = """# HTTP API: every operation

Written by `python scripts/api_reference.py --write` from the operations the gateway declares (`api/surface.py`),
from which its OpenAPI document is generated too: a running gateway serves that at `/openapi.json`
(`http://127.0.0.1:8377/openapi.json`, no key needed), with every request's and answer's JSON Schema. Routes
marked (also under `/p/<profile>`) are served there too, for that profile. What the routes mean, their headers
and their error envelope: [HTTP API](http-api.md).

| method | path | who may call it | what | answers | errors |
|---|---|---|---|---|---|
"""


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def page() -> str:
    rows = []
    for op in OPERATIONS:
        path = f"`{op.path}`" + (" (also under `/p/<profile>`)" if op.mounted else "")
        answers = ", ".join(str(status) for status in sorted(op.answers))
        errors = ", ".join(str(status) for status in sorted(op.errors))
        rows.append(f"| {op.method} | {path} | {WHO[op.reach]} | {cell(op.summary)} | {answers} | {errors} |")
    return HEAD + "\n".join(rows) + "\n"


def main() -> int:
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page(), encoding="utf-8", newline="\n")
        print(f"wrote {PAGE}")
    else:
        sys.stdout.write(page())
    return 0


if __name__ == "__main__":
    sys.exit(main())
