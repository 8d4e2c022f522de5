"""``doctor --verify`` on every real-model case of docs/doctor-real-models.md: each program
of ``tests/programs`` run under ``compiletrace run``, then verified with the seconds: the
program as it is and with each fix, in interleaved rounds (3 by default), each run in fresh
processes on an empty compile cache, other fixes a finding names measured too
(``--alternatives``). A fix that needs an edit is measured the same way where the case names
the edited program (the program as it is and as edited, interleaved).

Each run goes only until the program is ready (its warm-up's end, or the end: these programs
end by itself), a grace, then it is stopped; ``--jobs N`` runs a round's trials side by side,
a fix decided after two rounds runs no third, and ``--budget S`` bounds each case's proof.

Prints one Markdown row per finding and fix: case, finding, fix, frame compiles, seconds at
stake (CPU, what the doctor said the fix can save), seconds saved (the median of the rounds'
paired differences ± half their range, CPU and wall), calibration (saved / at stake, CPU) and
the verdict with its why (every verdict but verified's); then each case's plan (every
verified fix together, measured once more) and the machine's load before and after.

    python benchmarks/verify_cases.py [--cases llm-lengths,layers] [--rounds 3] [--jobs 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

PROGRAMS = Path(__file__).resolve().parents[1] / "tests" / "programs"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


class Edit(NamedTuple):
    """A fix that needs an edit, measured: the finding it is for, the edit, the edited program."""

    kind: str
    change: str
    argv: list[str]


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
    "fixable": ["fixable.py"],
    "llm-lengths": ["hf_cases.py", "llm-lengths"],
    "llm-generate": ["hf_cases.py", "llm-generate"],
    "speech": ["hf_cases.py", "speech"],
    "layers": ["hf_cases.py", "layers"],
    "gpt2-6": ["hf_cases.py", "gpt2-6"],
    "gpt2-12": ["hf_cases.py", "gpt2-12"],
    "early-exit": ["early_exit.py", "whole"],
    "ddp-outer": ["torchrun", "ddp_step.py", "outer", "sequential"],
    "ddp-outer-net": ["torchrun", "ddp_step.py", "outer", "net"],
    "mamba": ["hf_cases.py", "mamba"],  # a state-space model: a tiny Mamba
}
_INNER = "DDP(torch.compile(model))"  # the edit for torch.compile(DDP(model))
EDITS: dict[str, list[Edit]] = {
    "llava": [Edit("graph_break", "call the model once before compiling it", ["hf_cases.py", "llava-warm"])],
    "llm-generate": [Edit("recompiles", "pad prompts to 16 tokens", ["hf_cases.py", "llm-generate-padded"])],
    "early-exit": [
        Edit("nothing_compiled", "compile the step, the exit check in Python", ["early_exit.py", "body"])
    ],
    "ddp-outer": [Edit("nothing_compiled", _INNER, ["torchrun", "ddp_step.py", "inner", "sequential"])],
    "ddp-outer-net": [Edit("nothing_compiled", _INNER, ["torchrun", "ddp_step.py", "inner", "net"])],
}


def _command(argv: Sequence[str], tmp: str) -> list[str]:
    argv = [a.format(tmp=tmp) for a in argv]
    if argv[0] == "torchrun":
        return [*TORCHRUN, str(PROGRAMS / argv[1]), *argv[2:]]
    return [sys.executable, str(PROGRAMS / argv[0]), *argv[1:]]


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def _portable(text: str) -> str:
    """``text`` with this machine's Python and venv paths as ``PYTHON`` and ``VENV``, so the
    table reads the same wherever it was made."""
    for path, name in ((sys.prefix, "VENV"), (sys.base_prefix, "PYTHON")):
        text = text.replace(path, name)
    return text


def _row(case: str, finding: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    return {
        "case": case,
        "finding": f"{finding['kind']}: {_portable(finding['title'])[:100]}",
        "at_stake_s": finding["seconds"],
        "fix": measured.get("fix"),
        "frame_compiles": measured.get("frame_compiles"),
        "compile_cpu_s": measured.get("compile_cpu_s"),
        "saved_cpu_s": measured.get("saved_cpu_s"),
        "saved_wall_s": measured.get("saved_wall_s"),
        "calibration": measured.get("calibration"),
        "verdict": measured.get("verdict"),
        "why": measured.get("why"),
        "runs": [measured.get("compile_cpu_s_runs"), measured.get("compile_s_runs")],
    }


PLANS: dict[str, str] = {}  # case -> its plan line


def _verify(
    case: str, argv: list[str], tmp: str, rounds: int, extra: Sequence[str] = ()
) -> list[dict[str, Any]]:
    job = f"{tmp}/{case}.json"
    out = f"{tmp}/{case}.verified.json"
    ct = [sys.executable, "-m", "compiletrace"]
    subprocess.run([*ct, "run", "--json", job, "--", *_command(argv, tmp)], check=True, capture_output=True)
    verify = [
        *ct,
        "doctor",
        "--verify",
        "--trust",
        "--alternatives",
        "--rounds",
        str(rounds),
        job,
        "--json",
        out,
        *extra,
    ]
    verified = subprocess.run(verify, capture_output=True)
    if verified.returncode not in (0, 1):  # 1: a --fail-on kind was found (none is asked for)
        raise SystemExit(f"{case}: doctor --verify failed: {verified.stderr.decode()[-2000:]}")
    rows = []
    written = json.loads(Path(out).read_text())
    if "plan" in written:
        PLANS[case] = _portable(str(written["plan"]["line"]))
    for finding in written["findings"]:
        evidence = finding["evidence"]
        rows.append(_row(case, finding, evidence.get("verify", {})))
        rows += [
            _row(case, finding, {**other, "fix": f"{other['fix']} (also)"})
            for other in evidence.get("verify_other", [])
        ]
    return rows


def _edits(case: str, argv: list[str], tmp: str, rounds: int) -> list[dict[str, Any]]:
    from compiletrace._app.verify import measure_edit, verified_findings

    rows = []
    for edit in EDITS.get(case, []):
        verdict = measure_edit(
            _command(argv, tmp),
            _command(edit.argv, tmp),
            edit.kind,
            change=f"edit: {edit.change}",
            rounds=rounds,
        )
        if verdict is None:
            rows.append(
                {"case": case, "finding": f"{edit.kind}: (not found)", "fix": edit.change, "verdict": "-"}
            )
            continue
        (finding,) = verified_findings([verdict])
        rows.append(_row(case, finding.to_dict(), finding.evidence["verify"]))
    return rows


def _pair(value: object, digits: int = 2) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        a, b = value
        return f"{a} -> {b}" if isinstance(a, int) else f"{a:.{digits}f} -> {b:.{digits}f}"
    return "-"


def _saved(value: object) -> str:
    return f"{value['median']:.2f} ± {value['spread']:.2f}" if isinstance(value, dict) else "-"


def _number(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="trials of a round side by side")
    parser.add_argument("--budget", type=float, default=None, help="seconds each case's proof may take")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    extra = ["--jobs", str(args.jobs)] + (["--budget", str(args.budget)] if args.budget else [])
    rows: list[dict[str, Any]] = []
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="verify-cases-") as tmp:
        for case in args.cases.split(","):
            found = _verify(case, CASES[case], tmp, args.rounds, extra)
            found += _edits(case, CASES[case], tmp, args.rounds)
            rows += found or [{"case": case, "finding": "(no finding)", "verdict": "-"}]
            print(f"{case}: {len(found)} rows (load {_load()})", file=sys.stderr, flush=True)
    print(
        "| case | finding | fix | frame compiles | compile CPU s | at stake s | saved CPU s | saved wall s "
        "| calibration | verdict |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cells = [
            r["case"],
            r["finding"],
            r.get("fix") or "-",
            _pair(r.get("frame_compiles")),
            _pair(r.get("compile_cpu_s")),
            _number(r.get("at_stake_s")),
            _saved(r.get("saved_cpu_s")),
            _saved(r.get("saved_wall_s")),
            _number(r.get("calibration")),
            r["verdict"] + (f": {_portable(r['why'])}" if r.get("why") else ""),
        ]
        print("| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |")
    for case, line in PLANS.items():
        print(f"\n{case}: {line}")
    print(
        f"\nload average (1, 5, 15 min): {load_before} before, {_load()} after; {args.rounds} rounds, "
        f"--jobs {args.jobs}"
    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
