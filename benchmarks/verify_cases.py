"""``doctor --verify`` on every real-model case of docs/doctor-real-models.md: each program
of ``tests/programs`` run under ``compiletrace run``, then verified (re-run once as it is and
once per fix that applies from outside, each in fresh processes on an empty compile cache).
Prints one Markdown row per finding: case, finding, fix, frame compiles, graph nodes and
compile seconds before and after, and the verdict. Counts are exact; seconds are as measured.

    python benchmarks/verify_cases.py [--cases t5-generate,llava] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parents[1] / "tests" / "programs"
CASES: dict[str, list[str]] = {
    "bert-lengths": ["hf_bert.py"],
    "llama-generate": ["hf_llama.py", "generate", "{tmp}/oracle.json"],
    "t5-generate": ["hf_cases.py", "t5-generate"],
    "llama-unrolled": ["unrolled_llama.py"],
    "llava": ["hf_cases.py", "llava"],
    "llava-warm": ["hf_cases.py", "llava-warm"],
    "vit-item": ["hf_cases.py", "item"],
    "vit-disable": ["hf_cases.py", "disable"],
    "vit-fullgraph": ["hf_cases.py", "fullgraph"],
}


def _verify(case: str, argv: list[str], tmp: str) -> list[dict[str, object]]:
    job = f"{tmp}/{case}.json"
    out = f"{tmp}/{case}.verified.json"
    program = [sys.executable, str(PROGRAMS / argv[0]), *(a.format(tmp=tmp) for a in argv[1:])]
    ct = [sys.executable, "-m", "compiletrace"]
    subprocess.run([*ct, "run", "--json", job, "--", *program], check=True, capture_output=True)
    verified = subprocess.run([*ct, "doctor", "--verify", "--trust", job, "--json", out], capture_output=True)
    if verified.returncode not in (0, 1):  # 1: a --fail-on kind was found (none is asked for)
        raise SystemExit(f"{case}: doctor --verify failed: {verified.stderr.decode()[-2000:]}")
    rows = []
    for finding in json.loads(Path(out).read_text())["findings"]:
        measured = finding["evidence"].get("verify", {})
        rows.append(
            {
                "case": case,
                "finding": f"{finding['kind']}: {finding['title'][:90]}",
                "seconds": finding["seconds"],
                "fix": measured.get("fix"),
                "frame_compiles": measured.get("frame_compiles"),
                "graph_nodes": measured.get("graph_nodes"),
                "compile_s": measured.get("compile_s"),
                "verdict": measured.get("verdict"),
            }
        )
    return rows


def _pair(value: object) -> str:
    return f"{value[0]} -> {value[1]}" if isinstance(value, list) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="verify-cases-") as tmp:
        for case in args.cases.split(","):
            found = _verify(case, CASES[case], tmp)
            rows += found or [{"case": case, "finding": "(no finding)", "verdict": "-"}]
            print(f"{case}: {len(found)} findings", file=sys.stderr, flush=True)
    print("| case | finding | fix | frame compiles | graph nodes | compile s | verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['case']} | {r['finding']} | {r.get('fix') or '-'} | {_pair(r.get('frame_compiles'))} | "
            f"{_pair(r.get('graph_nodes'))} | {_pair(r.get('compile_s'))} | {r['verdict']} |"
        )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
