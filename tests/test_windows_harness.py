"""`make windows`'s own files, checked on any platform: the tests its list names exist, each deselected one
says why, and the Wine shim exports what it defines (the check itself runs under Wine: make windows)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = ROOT / "scripts" / "windows"
sys.path.insert(0, str(WINDOWS))

import check  # noqa: E402  (scripts/windows/check.py)


def test_every_pure_test_listed_names_a_test_file_or_test_that_exists() -> None:
    selected, deselected = check.pure_tests()
    assert selected, "pure-tests.txt lists no test"
    for test_id in [*selected, *(test_id for test_id, _ in deselected)]:
        path, _, name = test_id.partition("::")
        assert (ROOT / path).is_file(), f"{test_id}: no {path}"
        if name:
            function = name.split("[")[0].split("::")[-1]
            assert re.search(rf"^\s*(async )?def {function}\(", (ROOT / path).read_text(), re.M), test_id


def test_every_deselected_pure_test_says_why() -> None:
    _, deselected = check.pure_tests()
    for test_id, why in deselected:
        assert why, f"{test_id} is deselected in pure-tests.txt without a reason"


def test_the_shim_exports_the_function_it_defines() -> None:
    exported = re.findall(r"^\s+(\w+)\s*$", (WINDOWS / "bcryptprimitives.def").read_text(), re.M)
    source = (WINDOWS / "bcryptprimitives.c").read_text()
    assert exported == ["ProcessPrng"]
    assert re.search(r"BOOL WINAPI ProcessPrng\(", source)
