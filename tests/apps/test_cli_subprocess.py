"""The CLI end to end, as a user runs it: a separate process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test starts the command line as a process


@pytest.mark.slow
def test_python_m_compiletrace_profile_then_report(tmp_path: Path) -> None:
    run_json = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "profile", "--backend", "aot_eager", "--json", str(run_json)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no terminal: no progress display
    summary = [line for line in proc.stdout.splitlines() if line.startswith("compilation took")]
    assert len(summary) == 1 and "encoder:" in summary[0]
    data = json.loads(run_json.read_text())
    assert {r["component"] for r in data["registry"]["records"]} == {"encoder", "language_model"}
    assert all(r["backend"] == "aot_eager" for r in data["registry"]["records"])

    bad = subprocess.run(
        [sys.executable, "-m", "compiletrace", "report", str(tmp_path / "missing.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr


# -- commands that never wait for torch ---------------------------------------------------

RUNS = Path(__file__).resolve().parents[1] / "inputs" / "runs"  # made by make_cli_small.py
RUN, RUN_B = str(RUNS / "cli_small.run.json"), str(RUNS / "cli_small_b.run.json")
NODES = Path(__file__).resolve().parents[1] / "inputs" / "nodes" / "node_cache_miss"
NODE_JOBS = [str(NODES / "node0.json"), str(NODES / "node1.json")]
HELPS = [[], ["profile"], ["bench"], ["bench", "startup"], ["report"], ["cache"], ["cache", "save"],
         ["cache", "inspect"], ["cache", "load"], ["compare"], ["doctor"], ["env"]]  # fmt: skip


# ``python -m compiletrace ARGV``, which at its exit writes the names in sys.modules to a file.
_WITH_MODULES = (
    "import atexit, json, os, runpy, sys\n"
    "out = os.environ['CT_MODULES_OUT']\n"
    "atexit.register(lambda: open(out, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['compiletrace', *sys.argv[1:]]\n"
    "runpy.run_module('compiletrace', run_name='__main__', alter_sys=True)\n"
)


def _imported(argv: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``python -m compiletrace ARGV`` as a user runs it, and every module in its
    ``sys.modules`` when it exits."""
    out = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", _WITH_MODULES, *argv],
        capture_output=True, text=True, timeout=300, env={**os.environ, "CT_MODULES_OUT": str(out)},
    )  # fmt: skip
    return proc, set(json.loads(out.read_text()))


def _torch(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == "torch" or m.startswith("torch."))


@pytest.mark.parametrize(
    "argv",
    [
        *([*cmd, "--help"] for cmd in HELPS),
        ["report", RUN],
        ["doctor", RUN],
        ["compare", RUN, RUN_B],
        ["report", *NODE_JOBS],  # several nodes' jobs: a job's tables need no torch either
        ["report", str(RUNS / "missing.run.json")],  # bad input is refused before torch too
    ],
    ids=lambda argv: " ".join(a.rpartition("/")[2] for a in argv),
)
def test_reading_a_run_and_every_help_import_no_torch(argv: list[str], tmp_path: Path) -> None:
    proc, modules = _imported(argv, tmp_path)
    assert "compiletrace.cli" in modules  # the list is read: the command's own modules are in it
    assert _torch(modules) == [], proc.stderr[-2000:]
    expected = 2 if "missing.run.json" in argv[-1] else 0
    assert proc.returncode == expected, proc.stderr[-2000:]
    if argv[1:2] == [RUN]:  # what each prints: the summary, the verdict, the comparison
        said = {"report": "compilation took", "doctor": "No findings", "compare": "no regression"}
        assert said[argv[0]] in proc.stdout


def test_run_help_imports_no_torch(tmp_path: Path) -> None:
    proc, modules = _imported(["run", "--help"], tmp_path)
    assert proc.returncode == 0 and "--apply FIX" in proc.stdout
    assert _torch(modules) == []


def test_a_command_imports_its_own_module_alone(tmp_path: Path) -> None:
    proc, modules = _imported(["compare", RUN, RUN_B], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = sorted(m for m in modules if m.startswith("compiletrace.cli.commands."))
    assert commands == ["compiletrace.cli.commands.compare"]
    proc, modules = _imported(["--help"], tmp_path)
    assert proc.returncode == 0 and "compiletrace.cli.commands" in modules
    assert not [m for m in modules if m.startswith("compiletrace.cli.commands.")]


# -- numbers read as text: ASCII decimal digits --------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["run", "--ready", "port:\u00b2", "--", "true"],
            "port:N needs a whole number from 1 to 65535 in ASCII",
        ),
        (
            ["run", "--ready", "step:\u00b3", "--", "true"],
            "step:N needs a whole number from 1 to 999999 in ASCII",
        ),
        (["bench", "startup", "--ready", "port:\u0663", "--", "true"], "port:N needs a whole number"),
        (["bench", "startup", "--num-iters-cold", "\u0663", "--", "true"], "not a whole number in ASCII"),
        (["doctor", "job.json", "--verify", "--grace", "\u00b2"], "not a number in ASCII digits"),
    ],
)
def test_a_number_that_is_not_ascii_digits_is_a_usage_error(
    tmp_path: Path, argv: list[str], said: str
) -> None:
    """``--ready port:²`` ended in a ValueError traceback, exit 1: now one line saying what
    was wrong, exit 2, and nothing runs."""
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert "ASCII digits 0-9" in proc.stderr and not list(tmp_path.iterdir())


# -- an output on standard output is all it holds ------------------------------------------

# Each command with its output (OUT where its path goes) and what it reads.
_OUTPUTS = {
    "report run --json": ["report", "--json", "OUT", RUN],
    "report job --json": ["report", "--json", "OUT", *NODE_JOBS],
    "report --html": ["report", "--html", "OUT", RUN],
    "report job --chrome-trace": ["report", "--chrome-trace", "OUT", *NODE_JOBS],
    "doctor --json": ["doctor", "--json", "OUT", *NODE_JOBS],
    "doctor --html": ["doctor", "--html", "OUT", RUN],
    "why --json": ["why", "--json", "OUT", RUN, RUN_B],
}


def _whole(text: str, argv: list[str]) -> None:
    """``text`` is the output alone: JSON that parses whole, or one HTML page."""
    if "--html" in argv:
        assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>"), text[-300:]
        assert text.count("</html>") == 1
    else:
        json.loads(text)  # no text before or after it


def _compiletrace(argv: list[str], out: str, **how: object) -> subprocess.CompletedProcess[str]:
    argv = [out if a == "OUT" else a for a in argv]
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "compiletrace", *argv], text=True, timeout=300, **how
    )


@pytest.mark.parametrize("out", ["-", "/dev/stdout"])
@pytest.mark.parametrize("argv", list(_OUTPUTS.values()), ids=list(_OUTPUTS))
def test_an_output_on_stdout_is_the_whole_of_it(argv: list[str], out: str) -> None:
    proc = _compiletrace(argv, out, capture_output=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _whole(proc.stdout, argv)


@pytest.mark.parametrize("out", ["/dev/stdout", "/proc/self/fd/1", "THE FILE"])
@pytest.mark.parametrize("argv", list(_OUTPUTS.values()), ids=list(_OUTPUTS))
def test_an_output_to_stdout_redirected_to_a_file_is_the_whole_file(
    argv: list[str], out: str, tmp_path: Path
) -> None:
    """``--json /dev/stdout > out.json`` (or the file's own name: ``--json out.json > out.json``)
    leaves the output whole in the file: the text is held back, and the output goes after
    what stdout holds, not over it from the file's start."""
    path = tmp_path / "out.txt"
    with path.open("w") as stdout:
        proc = _compiletrace(
            argv, str(path) if out == "THE FILE" else out, stdout=stdout, stderr=subprocess.PIPE
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    _whole(path.read_text(), argv)


def test_two_outputs_on_stdout_are_refused() -> None:
    proc = _compiletrace(["report", "--json", "-", "--html", "/dev/stdout", RUN], "", capture_output=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "are both standard output" in proc.stderr and proc.stderr.count("\n") == 1


def test_run_refuses_its_outputs_on_stdout_by_any_name() -> None:
    for out in ("-", "/dev/stdout"):
        proc = _compiletrace(["run", "--json", "OUT", "--", "true"], out, capture_output=True)
        assert proc.returncode == 2 and "stdout is the command's own" in proc.stderr
