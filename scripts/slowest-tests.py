#!/usr/bin/env python3
"""The slowest tests of one or more ctest runs: scripts/slowest-tests.py N FILE.xml...

Reads the JUnit files `ctest --output-junit` writes (scripts/test.sh writes one per suite, named
after it) and prints the N longest test times, each with its suite; a file that is missing or
unreadable is named and skipped.
"""
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def test_times(path):
    root = ElementTree.parse(path).getroot()
    for case in root.iter("testcase"):
        yield float(case.get("time", "0")), case.get("name", "?")


def main(argv):
    top = int(argv[1])
    rows = []
    for name in argv[2:]:
        path = Path(name)
        try:
            rows += [(seconds, path.stem, test) for seconds, test in test_times(path)]
        except (OSError, ElementTree.ParseError) as error:
            print(f"slowest-tests: {name}: {error}", file=sys.stderr)
    rows.sort(reverse=True)
    print(f"the {min(top, len(rows))} slowest of {len(rows)} tests:")
    for seconds, suite, test in rows[:top]:
        print(f"  {seconds:7.1f} s  {suite:12}  {test}")


if __name__ == "__main__":
    main(sys.argv)
