"""`make audit`: the locked runtime dependencies checked against PyPI's advisory data.

`uv export` writes the lock's runtime packages (what the image installs), `pip-audit` looks each
pinned release up in PyPI's JSON API (its `vulnerabilities`, fed by the Python advisory
database) and this module judges the answer: a known vulnerability with a fixed release fails,
unless `ops/audit-allow.toml` lists it with a reason and an expiry not yet past; one with no
fixed release is printed. A package PyPI could not answer for makes the audit incomplete, which
fails too: an audit that read nothing must not pass.

    python -m dev.audit            exit 0 clean, 1 vulnerable (or an expired exception),
                                   3 incomplete (the advisory data could not be read)
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ALLOW_LIST = ROOT / "ops" / "audit-allow.toml"
CLEAN, VULNERABLE, INCOMPLETE = 0, 1, 3


@dataclass(frozen=True)
class Allowance:
    id: str
    package: str
    reason: str
    expires: dt.date


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    id: str
    aliases: tuple[str, ...]
    fixed_in: tuple[str, ...]

    def names(self) -> set[str]:
        return {self.id, *self.aliases}


@dataclass(frozen=True)
class Verdict:
    failing: list[str]
    noted: list[str]
    skipped: list[str]

    @property
    def code(self) -> int:
        if self.failing:
            return VULNERABLE
        return INCOMPLETE if self.skipped else CLEAN


def read_allow_list(text: str) -> tuple[list[Allowance], list[str]]:
    """The exceptions, and what is wrong with the entries that are not one."""
    entries: list[Allowance] = []
    problems: list[str] = []
    for index, raw in enumerate(tomllib.loads(text).get("allow", []), start=1):
        missing = [key for key in ("id", "package", "reason", "expires") if not raw.get(key)]
        if missing:
            problems.append(f"allow-list entry {index} has no {', '.join(missing)}")
            continue
        expires = raw["expires"]
        if not isinstance(expires, dt.date) or isinstance(expires, dt.datetime):
            problems.append(f"allow-list entry {index}: expires must be a date (2027-01-31)")
            continue
        entries.append(Allowance(str(raw["id"]), str(raw["package"]), str(raw["reason"]), expires))
    return entries, problems


def findings(report: Mapping[str, Any]) -> tuple[list[Finding], list[str]]:
    """pip-audit's JSON report: each vulnerability found, and each package it could not audit."""
    found: list[Finding] = []
    skipped: list[str] = []
    for dependency in report.get("dependencies", []):
        name, version = dependency["name"], dependency.get("version", "")
        if reason := dependency.get("skip_reason"):
            skipped.append(str(reason))
            continue
        for vuln in dependency.get("vulns", []):
            found.append(
                Finding(
                    name,
                    version,
                    vuln["id"],
                    tuple(vuln.get("aliases", [])),
                    tuple(vuln.get("fix_versions", [])),
                )
            )
    return found, skipped


def judge(
    found: Iterable[Finding],
    skipped: Sequence[str],
    allowed: Iterable[Allowance],
    problems: Sequence[str],
    today: dt.date,
) -> Verdict:
    """What fails: a fixable vulnerability no live exception covers, an expired or malformed
    exception. What is only told: a vulnerability with no fixed release, an excused one."""
    failing = list(problems)
    noted: list[str] = []
    live = []
    for entry in allowed:
        if entry.expires < today:
            failing.append(
                f"the exception for {entry.id} ({entry.package}) expired {entry.expires}"
            )
        else:
            live.append(entry)
    for finding in found:
        label = f"{finding.package} {finding.version}: {finding.id}"
        excuse = next(
            (
                e
                for e in live
                if e.id in finding.names() and _canonical(e.package) == _canonical(finding.package)
            ),
            None,
        )
        if excuse is not None:
            noted.append(f"{label} allowed until {excuse.expires}: {excuse.reason}")
        elif finding.fixed_in:
            failing.append(f"{label}, fixed in {', '.join(finding.fixed_in)}")
        else:
            noted.append(f"{label}, no fixed release yet")
    return Verdict(failing, noted, list(skipped))


def _canonical(name: str) -> str:
    """A package's name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_requirements(folder: Path) -> Path:
    """The lock's runtime packages, pinned with their hashes, as the image installs them."""
    path = folder / "requirements.txt"
    uv = [found] if (found := shutil.which("uv")) else ["python3", "-m", "uv"]
    exported = subprocess.run(
        [*uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--format=requirements-txt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    path.write_text(exported.stdout)
    return path


def run_pip_audit(requirements: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "pip_audit",
        *("--requirement", str(requirements), "--no-deps", "--disable-pip"),
        *("--vulnerability-service", "pypi", "--format", "json", "--progress-spinner", "off"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"audit: pip-audit gave no report:\n{result.stderr[-3000:]}") from exc
    return report


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    allowed, problems = read_allow_list(ALLOW_LIST.read_text())
    with tempfile.TemporaryDirectory(prefix="audit-") as scratch:
        report = run_pip_audit(locked_requirements(Path(scratch)))
    found, skipped = findings(report)
    verdict = judge(found, skipped, allowed, problems, dt.date.today())
    audited = len(report.get("dependencies", [])) - len(skipped)
    for line in verdict.noted:
        print(f"audit: note: {line}")
    for line in verdict.failing:
        print(f"audit: FAIL: {line}")
    if verdict.skipped:
        print(
            f"audit: INCOMPLETE: PyPI's advisory data could not be read for {len(skipped)}"
            f" of {len(report.get('dependencies', []))} locked packages, first:"
            f" {verdict.skipped[0]}"
        )
    print(f"audit: {audited} locked packages audited, {len(found)} known vulnerabilities")
    return verdict.code


if __name__ == "__main__":
    sys.exit(main())
