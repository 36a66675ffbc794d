"""`make audit`'s judgement over pip-audit's report (dev/audit.py): what fails, what is told."""

from __future__ import annotations

import datetime as dt

from dev import audit

TODAY = dt.date(2026, 12, 7)


def report(*dependencies: dict[str, object]) -> dict[str, object]:
    return {"dependencies": list(dependencies), "fixes": []}


def vulnerable(fixed: list[str], vuln_id: str = "GHSA-aaaa-bbbb-cccc") -> dict[str, object]:
    vuln = {"id": vuln_id, "aliases": ["CVE-2026-0001"], "fix_versions": fixed}
    return {"name": "jinja2", "version": "3.1.6", "vulns": [vuln]}


def allowance(expires: str, vuln_id: str = "CVE-2026-0001") -> str:
    return (
        f'[[allow]]\nid = "{vuln_id}"\npackage = "jinja2"\n'
        f'reason = "the sandbox is never used"\nexpires = {expires}\n'
    )


def verdict(found: dict[str, object], allow: str = "") -> audit.Verdict:
    allowed, problems = audit.read_allow_list(allow)
    vulns, skipped = audit.findings(found)
    return audit.judge(vulns, skipped, allowed, problems, TODAY)


def test_a_vulnerability_with_a_fixed_release_fails_the_audit() -> None:
    judged = verdict(report(vulnerable(["3.1.7"])))
    assert judged.code == audit.VULNERABLE
    assert judged.failing == ["jinja2 3.1.6: GHSA-aaaa-bbbb-cccc, fixed in 3.1.7"]


def test_an_exception_by_any_alias_passes_until_it_expires() -> None:
    live = verdict(report(vulnerable(["3.1.7"])), allowance("2027-01-31"))
    assert live.code == audit.CLEAN
    assert live.noted == [
        "jinja2 3.1.6: GHSA-aaaa-bbbb-cccc allowed until 2027-01-31: the sandbox is never used"
    ]
    expired = verdict(report(vulnerable(["3.1.7"])), allowance("2026-12-06"))
    assert expired.code == audit.VULNERABLE
    assert "the exception for CVE-2026-0001 (jinja2) expired 2026-12-06" in expired.failing
    # An expired exception fails even once the vulnerability is gone: it is looked at again.
    assert verdict(report(), allowance("2026-12-06")).code == audit.VULNERABLE


def test_an_exception_names_its_package_as_pypi_compares_names() -> None:
    spelled = allowance("2027-01-31").replace('package = "jinja2"', 'package = "Jinja2"')
    assert verdict(report(vulnerable(["3.1.7"])), spelled).code == audit.CLEAN


def test_an_exception_for_another_package_or_id_excuses_nothing() -> None:
    other = allowance("2027-01-31").replace('package = "jinja2"', 'package = "flask"')
    assert verdict(report(vulnerable(["3.1.7"])), other).code == audit.VULNERABLE
    wrong = allowance("2027-01-31", vuln_id="GHSA-zzzz-zzzz-zzzz")
    assert verdict(report(vulnerable(["3.1.7"])), wrong).code == audit.VULNERABLE


def test_an_exception_without_a_reason_or_a_date_fails() -> None:
    no_reason = '[[allow]]\nid = "X"\npackage = "jinja2"\nexpires = 2027-01-31\n'
    judged = verdict(report(), no_reason)
    assert (judged.code, judged.failing) == (
        audit.VULNERABLE,
        ["allow-list entry 1 has no reason"],
    )
    text_date = allowance('"soon"')
    assert verdict(report(), text_date).failing == [
        "allow-list entry 1: expires must be a date (2027-01-31)"
    ]


def test_no_fixed_release_is_told_not_failed() -> None:
    judged = verdict(report(vulnerable([])))
    assert judged.code == audit.CLEAN
    assert judged.noted == ["jinja2 3.1.6: GHSA-aaaa-bbbb-cccc, no fixed release yet"]


def test_a_package_pypi_could_not_answer_for_leaves_the_audit_incomplete() -> None:
    skipped: dict[str, object] = {
        "name": "flask",
        "skip_reason": "Dependency not found on PyPI: flask (3.1.3)",
    }
    judged = verdict(report(skipped, {"name": "jinja2", "version": "3.1.6", "vulns": []}))
    assert judged.code == audit.INCOMPLETE
    assert judged.skipped == ["Dependency not found on PyPI: flask (3.1.3)"]
    # A vulnerability found among the rest still fails as such.
    assert verdict(report(skipped, vulnerable(["3.1.7"]))).code == audit.VULNERABLE


def test_the_projects_allow_list_reads_clean() -> None:
    allowed, problems = audit.read_allow_list(audit.ALLOW_LIST.read_text())
    assert problems == []
    assert all(entry.expires >= dt.date.today() for entry in allowed)
