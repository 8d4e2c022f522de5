"""The costliest tests and test files of a run, by CPU seconds (the test's process and every
process it waited for), from the lines conftest.py writes under COMPILETRACE_TEST_CPU_LOG.

    python .ci/test_cpu.py LOG [N]
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(log: str, top: int = 30) -> None:
    by_test: Counter[str] = Counter()
    with open(log) as lines:
        for line in lines:
            row = json.loads(line)
            by_test[row["test"]] += row["cpu_s"]
    by_file: Counter[str] = Counter()
    for test, cpu in by_test.items():
        by_file[test.partition("::")[0]] += cpu
    total = sum(by_test.values())
    print(f"CPU seconds of {len(by_test)} tests: {total:.0f} in all")
    print(f"\nthe {top} costliest files:")
    for path, cpu in by_file.most_common(top):
        print(f"{cpu:8.1f} s  {path}")
    print(f"\nthe {top} costliest tests:")
    for test, cpu in by_test.most_common(top):
        print(f"{cpu:8.1f} s  {test}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(n) for n in sys.argv[2:3]))
