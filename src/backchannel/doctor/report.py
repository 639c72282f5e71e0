"""What `doctor` found: one check per line, each ok, a warning or a failure, with what to do about it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"  # worth knowing; nothing is broken
    FAIL = "fail"  # something is wrong: doctor exits 1

    @property
    def label(self) -> str:
        return "FAIL" if self is Status.FAIL else self.value


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, how it stands, what was seen, and (when not ok) what to do."""

    check: str  # "config.yaml", "profile coder", "endpoint coder", "gateway", "peer spark"
    status: Status
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "status": self.status.value, "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        return out


def ok(check: str, detail: str) -> Check:
    return Check(check, Status.OK, detail)


def warn(check: str, detail: str, fix: str | None = None) -> Check:
    return Check(check, Status.WARN, detail, fix)


def fail(check: str, detail: str, fix: str | None = None) -> Check:
    return Check(check, Status.FAIL, detail, fix)


@dataclass(frozen=True)
class Report:
    """Every check of one `doctor` run, in the order they were made."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when nothing failed (warnings allowed)."""
        return all(c.status is not Status.FAIL for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def count(self, status: Status) -> int:
        return sum(c.status is status for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks]}
