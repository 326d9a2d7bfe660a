#!/usr/bin/env python3
"""Fail CI on a skipped test that a clean machine with every extra installed should run.

Usage::

    python -m pytest -rs --junitxml=JUNIT.xml
    python .ci/check_skips.py JUNIT.xml

Reads the JUnit XML report that pytest wrote and prints every skip with its reason. It exits
with status 1 when

- a test marked ``reference`` was skipped, whatever the reason: comparisons with R and the
  other packages are what the suite exists for, and their data ship with the repository; or
- any test was skipped for a reason that is not on :data:`ALLOWED` below: needing a GPU, and
  the named optional extras that CI may lack.

``tests/conftest.py`` records each test's markers as the JUnit property ``markers``. A module
that skips as a whole at import (``pytest.importorskip`` at module level) has no markers in
the report; its reason must then be on the allow-list.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

# (what may be missing, a regular expression that the skip reason must match)
ALLOWED = (
    ("a CUDA device (tests marked gpu)", re.compile(r"^needs a CUDA device$")),
    ("a headless browser for the report's browser check (a system package, not pip)",
     re.compile(r"^no headless browser \(Debian: apt-get install chromium\)$")),
    ("the ekfac extra (kronfluence, installed without its dependencies)",
     re.compile(r"^EK-FAC needs the ekfac extra \(kronfluence\)$")),
)
NEVER_SKIPPED_MARKERS = ("reference",)


def skips(path) -> list[dict]:
    """Every skipped test case of a JUnit XML report: id, reason, markers."""
    root = ET.parse(path).getroot()
    found = []
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        reason = skipped.get("message", "")
        if reason == "collection skipped":
            # a module skipped at import: the text is "(path, line, 'Skipped: REASON')"
            found_reason = re.search(r"Skipped: (.*)'\)\s*$", skipped.text or "", re.S)
            reason = found_reason.group(1) if found_reason else (skipped.text or reason)
        reason = re.sub(r"^Skipped: ", "", reason).strip()
        markers = set()
        for prop in case.iter("property"):
            if prop.get("name") == "markers":
                markers.update(m for m in prop.get("value", "").split(",") if m)
        test_id = "::".join(p for p in (case.get("classname", ""), case.get("name", "")) if p)
        found.append({"id": test_id, "reason": reason, "markers": markers})
    return found


def verdict(skip: dict) -> str | None:
    """Why this skip fails CI, or ``None`` when it is allowed."""
    bad = sorted(set(NEVER_SKIPPED_MARKERS) & skip["markers"])
    if bad:
        return f"a test marked {', '.join(bad)} must never skip"
    for _, pattern in ALLOWED:
        if pattern.search(skip["reason"]):
            return None
    return "the reason is not on the allow-list of .ci/check_skips.py"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python .ci/check_skips.py JUNIT.xml", file=sys.stderr)
        return 2
    try:
        found = skips(argv[0])
    except (OSError, ET.ParseError) as exc:
        print(f"check_skips: cannot read the JUnit report {argv[0]!r}: {exc}", file=sys.stderr)
        return 2
    failures = 0
    print(f"{len(found)} skipped tests")
    for skip in found:
        why = verdict(skip)
        failures += why is not None
        status = "allowed" if why is None else "FORBIDDEN"
        print(f"  {status}: {skip['id']}: {skip['reason']}"
              + ("" if why is None else f" ({why})"))
    if failures:
        print(f"{failures} forbidden skips: a clean machine with every extra must run these tests."
              " Allowed: " + "; ".join(name for name, _ in ALLOWED) + ".")
        return 1
    print("no forbidden skips")
    return 0


if __name__ == "__main__":
    sys.exit(main())
