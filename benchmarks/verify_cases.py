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
the verdict with its why (every verdict but verified's); then one row per fix (the findings it
answers first, their stakes added, one calibration), each case's plan (every verified fix
together, measured in its own paired rounds), the calibration of each fix kind (the median
over the cases of its first fixes) and the doctor's goals read from them: no first fix that
makes start-up slower, at least 80% of first fixes saving 0.5-2x their stake, and how many
cases end with a plan. With ``--json OUT``: the rows, the fixes and the plans, as written.

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


PLANS: dict[str, dict[str, Any]] = {}  # case -> its plan, as the doctor's JSON holds it
FIXES: list[dict[str, Any]] = []  # every case's fixes, as the doctor's JSON holds them, with the case


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
        PLANS[case] = written["plan"]
    FIXES.extend({"case": case, **fix} for fix in written.get("fixes", []))
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


CALIBRATED = (0.5, 2.0)  # a fix saves between half and twice what the doctor put at stake
SLOWER = "made it slower"


def fix_kind(fix: str) -> str:
    """A fix's kind: its name without its argument (``mark-dynamic`` of ``mark-dynamic=L['x']:0``)."""
    return fix.partition("=")[0]


def first_fixes(fixes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixes each finding offers first: no alternative, no gate."""
    return [f for f in fixes if not f.get("alternative") and not f.get("gate") and f.get("fix")]


def goals(fixes: Sequence[dict[str, Any]], plans: int) -> list[str]:
    """The doctor's goals, read from every case's fixes: each kind's median calibration, the
    first fixes that made start-up slower, the share within 0.5-2x of their stake, the plans.

    >>> goals([{"fix": "mark-dynamic=x", "calibration": 0.9, "verdict": "verified"},
    ...        {"fix": "mark-dynamic=y", "calibration": -0.3, "verdict": "made it slower"},
    ...        {"fix": "dynamic-shapes", "calibration": 3.0, "verdict": "verified", "alternative": True}], 1)
    ['mark-dynamic: median calibration 0.30 over 2 first fixes (outside 0.5-2)', \
'first fixes that made start-up slower: 1 (mark-dynamic=y)', \
'first fixes within 0.5-2x of their stake: 1 of 2 (50%; the goal: 80%)', 'cases with a plan: 1']
    """
    first = first_fixes(fixes)
    judged = [f for f in first if isinstance(f.get("calibration"), (int, float))]
    lines = []
    by_kind: dict[str, list[float]] = {}
    for f in judged:
        by_kind.setdefault(fix_kind(f["fix"]), []).append(float(f["calibration"]))
    for kind, values in sorted(by_kind.items()):
        ordered = sorted(values)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        inside = CALIBRATED[0] <= median <= CALIBRATED[1]
        lines.append(
            f"{kind}: median calibration {median:.2f} over {len(values)} first fix"
            + ("es" if len(values) != 1 else "")
            + ("" if inside else f" (outside {CALIBRATED[0]:g}-{CALIBRATED[1]:g})")
        )
    slower = [f["fix"] for f in first if f.get("verdict") == SLOWER]
    named = f" ({', '.join(slower)})" if slower else ""
    lines.append(f"first fixes that made start-up slower: {len(slower)}{named}")
    within = [f for f in judged if CALIBRATED[0] <= f["calibration"] <= CALIBRATED[1]]
    share = len(within) / len(judged) if judged else 0.0
    lines.append(
        f"first fixes within {CALIBRATED[0]:g}-{CALIBRATED[1]:g}x of their stake: {len(within)} of "
        f"{len(judged)} ({share:.0%}; the goal: 80%)"
    )
    lines.append(f"cases with a plan: {plans}")
    return lines


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
    print("\n| case | fix | answers | at stake s | saved CPU s | calibration | verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for f in FIXES:
        marked = f["fix"] + (" (also)" if f.get("alternative") else " (gate)" if f.get("gate") else "")
        cells = [
            f["case"],
            _portable(marked),
            ", ".join(f.get("answers", [])),
            _number(f.get("at_stake_s")),
            _saved(f.get("saved_cpu_s")),
            _number(f.get("calibration")),
            f.get("verdict", "-"),
        ]
        print("| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |")
    for case, plan in PLANS.items():
        print(f"\n{case}: {_portable(str(plan.get('line')))}")
    print()
    for line in goals(FIXES, len(PLANS)):
        print(line)
    print(
        f"\nload average (1, 5, 15 min): {load_before} before, {_load()} after; {args.rounds} rounds, "
        f"--jobs {args.jobs}"
    )
    if args.json_out:
        written = {"rows": rows, "fixes": FIXES, "plans": PLANS, "rounds": args.rounds, "jobs": args.jobs}
        Path(args.json_out).write_text(_portable(json.dumps(written, indent=1)))


if __name__ == "__main__":
    main()
