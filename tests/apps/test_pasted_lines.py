"""Every line the doctor, ``why`` and ``doctor --verify``'s plan print for pasting runs what it
says and nothing else, in text, HTML and JSON alike: a run file someone hands you may name a
recompile's input ``L['$(...)']``, a block's class ``Block$(...)`` or a cache directory
``/tmp/$(...)``, and none of it reaches a command line as shell code. A fix argument that is
not what torch writes is not offered (and the finding says so); every word printed in a
command is quoted for a shell (``compiletrace._io.text.shell_line``); the plan's line is the
command verified, argument for argument (a ``\\d+``, a tab, an escape character).

The fast tests read the outputs; the slow ones paste each printed line into bash, with
``compiletrace`` a stub, and check that only the stub ran, with exactly the arguments shown.
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compiletrace import cli
from compiletrace._app.job import NEVER_READY
from compiletrace._app.verify import Plan
from compiletrace._data.files import read
from compiletrace._data.fixes import apply_line, parse_fix
from compiletrace._data.run import Run
from compiletrace._doctor import gather_evidence, rule_for
from compiletrace._doctor.shared import NO_CLASS_LINE
from compiletrace._io.text import shell_line, shell_word
from tests.apps.test_verify import _trial
from tests.conftest import make_record, save_run

RUNS = Path(__file__).parents[1] / "inputs" / "runs"
BASE_JOB = Path(__file__).parents[1] / "inputs" / "traces" / "cache" / "base.job.json"

MARKER = "PWNED"  # what each payload makes, in the directory the pasted line runs in
PAYLOAD = f"$(touch${{IFS}}{MARKER})"  # no space: one word, as a file's name would be
SOURCE = f"L['{PAYLOAD}']:0"  # a recompile's input, as a run file may name it
CLASS = f"Block{PAYLOAD}"  # a block's class, as a run file may name it
LEGIT_SOURCE = "L['x']:0"


# -- the hostile files ----------------------------------------------------------------------


def _edited(name: str, edit: Any) -> dict[str, Any]:
    data = json.loads((RUNS / f"{name}.run.json").read_text())
    for record in data["registry"]["records"]:
        edit(record)
    return data  # type: ignore[no-any-return]


def _write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def _sources(record: dict[str, Any]) -> None:
    record["dynamic_sources"] = [SOURCE, LEGIT_SOURCE] if record["compile_id"] == "0/3" else []


def _reason(record: dict[str, Any]) -> None:
    if record["recompile_reason"]:  # "tensor 'x' size mismatch ...": a name no input has
        record["recompile_reason"] = record["recompile_reason"].replace("'x'", f"'x{PAYLOAD}'")


def _repeated_block(record: dict[str, Any]) -> None:
    record["repeated_block"]["class_name"] = CLASS


def _graph_block(record: dict[str, Any]) -> None:
    record["graph_block"] = CLASS


def _shared_frame_run(path: Path) -> str:
    """Blocks of one class compiled one by one, sharing their forward's frame, each after the
    first specialising on its own layer (``.layers[i]``): the class a run file names."""
    where = {"code_filename": "m.py", "code_firstlineno": 3, "module_class": CLASS}
    records = [make_record("0/0", "lm", module_path="layers.0", **where)]
    for i in (1, 2):
        records.append(
            make_record(
                f"0/{i}",
                "lm",
                module_path=f"layers.{i}",
                is_recompile=True,
                frame_attempt=i,
                recompile_reason=f"0/{i - 1}: ___check_obj_id(self.layers[{i}], 1)",
                recompile_limit=8,
                **where,
            )
        )
    return str(save_run(path, records))


def _doctor_files(tmp: Path) -> Iterator[str]:
    yield _write(tmp / "sources.run.json", _edited("recompiles", _sources))
    yield _write(tmp / "reason.run.json", _edited("recompiles", _reason))
    yield _write(tmp / "limit.run.json", _edited("recompile_limit", _reason))
    yield _write(tmp / "block.run.json", _edited("repeated_block", _repeated_block))
    yield _write(tmp / "graph.run.json", _edited("repeated_graph", _graph_block))
    yield _shared_frame_run(tmp / "shared.run.json")


def _job_sides(tmp: Path, base_dir: str, current_dir: str, current_from: str) -> tuple[str, str]:
    """BASE's job (torch's cache under ``base_dir``) and CURRENT's (under ``current_dir``,
    chosen by ``current_from``): one graph whose key is the same, missed in CURRENT."""
    data = json.loads(BASE_JOB.read_text())
    sides = []
    chosen_by = (("base", base_dir, "TORCHINDUCTOR_CACHE_DIR"), ("cur", current_dir, current_from))
    for name, where, chosen in chosen_by:
        side = copy.deepcopy(data)
        for process in side["processes"]:
            facts = process["run"]["meta"]["cache_keys"]["facts"]
            facts.update(cache_dir=where, cache_dirs=[where], cache_dir_from=chosen)
        sides.append(_write(tmp / f"{name}.{current_from}.job.json", side))
    return sides[0], sides[1]


CACHE_DIR = f"/tmp/{PAYLOAD}/it's here"  # a BASE's cache directory, as its job may name it
VLLM_ROOT = f"/tmp/{PAYLOAD}"


def _why_files(tmp: Path) -> Iterator[tuple[str, str]]:
    yield _job_sides(tmp, CACHE_DIR, "/tmp/other", "default")
    named = f"{os.sep}torch_compile_cache{os.sep}0a1b2c"
    yield _job_sides(tmp, VLLM_ROOT + named, "/srv/vllm" + named, "TORCHINDUCTOR_CACHE_DIR")


# -- what the views print ---------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _page_text(page: str) -> str:
    """An HTML page's text as a browser shows it, to copy from (tags out, entities read)."""
    body = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S).replace("<wbr>", "")
    return html.unescape(re.sub(r"<[^>]+>", "\n", body))  # each cell, item, heading a line


def _views(command: str, files: list[str], tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``compiletrace COMMAND FILES``' text, its HTML page's text, and its JSON."""
    json_path, html_path = tmp / f"{command}.json", tmp / f"{command}.html"
    assert cli.main([command, *files, "--json", str(json_path), "--html", str(html_path)]) == 0
    return {
        "text": capsys.readouterr().out,
        "html": _page_text(html_path.read_text()),
        "json": json.loads(json_path.read_text()),
    }


def _lines(views: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(view, line) for each line of each view: the JSON's strings, each line of each."""
    for view in ("text", "html"):
        yield from ((view, line) for line in views[view].splitlines())
    for text in _strings(views["json"]):
        yield from (("json", line) for line in text.splitlines())


_APPLY = re.compile(r"(?:compiletrace )?run --apply ")
_SETTING = re.compile(r"\b(TORCHINDUCTOR_CACHE_DIR|VLLM_CACHE_ROOT)=")


def _apply_commands(views: dict[str, Any]) -> list[tuple[str, str]]:
    """(view, the rest of the line) from each ``run --apply`` printed: what a user pastes
    (with ``compiletrace`` in front where the line leaves it out)."""
    found = []
    for view, line in _lines(views):
        for m in _APPLY.finditer(line):
            found.append((view, "compiletrace " + line[m.start() :].removeprefix("compiletrace ")))
    return found


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100000")  # no prose wrapped: one printed line a line


def _doctor_views(tmp: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    views = []
    for i, path in enumerate(_doctor_files(tmp)):
        (tmp / str(i)).mkdir()
        views.append(_views("doctor", [path], tmp / str(i), capsys))
    return views


# -- fast: what is offered -------------------------------------------------------------------


def test_a_fix_argument_that_is_not_what_torch_writes_is_never_offered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    every = _doctor_views(tmp_path, capsys)
    findings = [f for views in every for f in views["json"]["findings"]]
    offered = [f["evidence"]["auto_fix"] for f in findings if "auto_fix" in f["evidence"]]
    assert offered  # the input torch does name is still offered
    for fix in offered:
        parse_fix(fix)  # what run --apply takes: nothing else is in the JSON's auto_fix
        assert PAYLOAD not in fix
    by_kind = {f["kind"]: f for f in every[0]["json"]["findings"]}
    recompiles = by_kind["recompiles"]
    assert recompiles["evidence"]["auto_fix"] == f"mark-dynamic={LEGIT_SOURCE}"
    assert recompiles["evidence"]["not_offered"] == [SOURCE]  # said, as data, never in a command
    assert f"""compiletrace run --apply "mark-dynamic={LEGIT_SOURCE}" (in code""" in recompiles["fix"]
    # A guard's name that is no input (the recompile's reason, in a run without torch's
    # state): no mark-dynamic is offered for it.
    for views in every[1:3]:
        for finding in views["json"]["findings"]:
            assert "mark-dynamic" not in finding["evidence"].get("auto_fix", "")
            assert finding["evidence"].get("not_offered") == [f"L['x']{PAYLOAD}:0"]
    # A block's class that is no Python identifier: no regional-compile, and the fix says why.
    for views, kind in zip(every[3:], ("repeated_block", "repeated_graph", "shared_frame"), strict=True):
        (finding,) = [f for f in views["json"]["findings"] if f["kind"] == kind]
        assert "auto_fix" not in finding["evidence"] and "run --apply" not in finding["fix"]
        if kind != "repeated_graph":  # whose prose names no command
            assert NO_CLASS_LINE in finding["fix"]
            assert NO_CLASS_LINE in views["text"] and NO_CLASS_LINE in views["html"]


def test_a_regional_fix_of_a_real_class_is_printed_as_a_command() -> None:
    run = read(RUNS / "repeated_block.run.json")
    assert isinstance(run, Run)
    (finding,) = rule_for("repeated_block").check(gather_evidence(run))
    assert "(compiletrace run --apply regional-compile=Block);" in finding.fix
    assert finding.evidence["auto_fix"] == "regional-compile=Block"


def test_a_cache_directory_from_a_file_is_quoted_where_it_is_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    (default, vllm) = list(_why_files(tmp_path))
    cases = ((default, f"TORCHINDUCTOR_CACHE_DIR={CACHE_DIR}"), (vllm, f"VLLM_CACHE_ROOT={VLLM_ROOT}"))
    for files, setting in cases:
        views = _views("why", list(files), tmp_path, capsys)
        (group,) = views["json"]["groups"]
        name, _, value = setting.partition("=")
        quoted = re.compile(re.escape(f"set {name}={shell_word(value)}") + "(?: |$)", re.M)
        assert quoted.search(group["reason"]["fix"])
        assert quoted.search(views["text"]) and quoted.search(views["html"])
        assert f"set {setting}" not in views["text"]


def test_a_directory_a_line_cannot_show_as_it_is_is_not_printed_to_paste(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for odd in ("/tmp/a\\b", "/tmp/a\x1b[2Jb"):
        views = _views("why", list(_job_sides(tmp_path, odd, "/tmp/other", "default")), tmp_path, capsys)
        fix = views["json"]["groups"][0]["reason"]["fix"]
        assert fix.startswith("set TORCHINDUCTOR_CACHE_DIR to the filled directory (its name holds a ")
        assert odd not in fix and shell_word(odd) not in fix


def test_the_trace_directory_to_fill_is_quoted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "my traces"
    empty.mkdir()
    assert cli.main(["report", str(empty)]) == 2
    assert f"run the program with TORCH_TRACE='{empty}' first" in capsys.readouterr().err


# -- fast: the plan's line is the command verified ----------------------------------------------

# What the plan re-ran, word for word: a pattern, a tab, an escape, a quote, a shell's
# syntax, a character outside ASCII, an empty word, a byte that is no UTF-8.
ARGV = (
    "python",
    "-c",
    "import re, sys; print(re.findall(r'\\d+', sys.argv[1]))",
    "\\d+",
    "a\tb",
    "\x1b[31mred",
    "it's $HOME `id` $(touch PWNED)",
    "naïve",
    "",
    "\udcff",
)
FIXES = ("mark-dynamic=L['x']:0", "regional-compile=Block")


def _plan(never_ready: bool = False) -> Plan:
    base = [_trial(4, recompiles=2, cpu_s=5.0)]
    after = _trial(2, cpu_s=4.0)
    return Plan(FIXES, ARGV, tuple(base), (replace(after, stopped=NEVER_READY) if never_ready else after,))


def _expected() -> list[str]:
    return ["compiletrace", "run", "--apply", FIXES[0], "--apply", FIXES[1], "--", *ARGV]


def test_the_plans_line_is_the_verified_command_exactly() -> None:
    for plan in (_plan(), _plan(never_ready=True)):
        line = plan.line()
        assert line.isprintable()  # safe on a terminal: the escape is written \x1b
        command = line[line.index("compiletrace run") :]
        assert command == plan.run_line == plan.to_dict()["command"]
        assert "'\\d+'" in command and "\\\\d" not in command  # the pattern as given, not doubled
        assert "$'a\\tb'" in command and "$'\\x1b[31mred'" in command and "$'\\xff'" in command
    # Where every word is printable, shlex (a POSIX shell's reading) gives the argv back.
    printable_argv = [w for w in ARGV if w.isprintable()]
    plan = Plan(FIXES, tuple(printable_argv), _plan().base_runs, _plan().runs)
    line = plan.line()
    assert shlex.split(line[line.index("compiletrace run") :]) == [*_expected()[:7], *printable_argv]


def test_shell_words_read_back_as_given() -> None:
    for word in ("plain", "", "a b", "it's", 'say "hi"', "$(id)", "`id`", "!x", "\\d+", "a'b\"c$d", "é"):
        quoted = shell_word(word)
        assert shlex.split(quoted) == [word] and quoted.isprintable()
    assert shell_line(["compiletrace", "run", "--apply", "mark-dynamic=L['x']:0"]) == apply_line(
        ["mark-dynamic=L['x']:0"]
    )
    # Not printable: bash's $'...', every such character as the bytes it stands for.
    assert shell_word("a\tb\n") == "$'a\\tb\\n'"
    assert shell_word("\u202efdp.exe") == "$'\\xe2\\x80\\xaefdp.exe'"
    assert shell_word("\x1b'!\\") == "$'\\x1b\\x27\\x21\\\\'"


# -- slow: pasted into bash --------------------------------------------------------------------

# A stub for compiletrace that records its arguments; any other command not found is noted.
_STUB = r"""
compiletrace() { printf 'call\n' >> "$CT_DIR/calls"; printf '%s\0' "$@" > "$CT_DIR/args"; }
command_not_found_handle() { printf '%s\n' "$1" >> "$CT_DIR/others"; return 127; }
"""


class Bash:
    """bash, in a directory of its own, with ``touch`` on its PATH (what the payloads call)
    and nothing else."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "paste"
        (self.dir / "bin").mkdir(parents=True)
        touch = next(Path(d) / "touch" for d in ("/usr/bin", "/bin") if (Path(d) / "touch").exists())
        (self.dir / "bin" / "touch").symlink_to(touch)
        self.env = {"PATH": str(self.dir / "bin"), "CT_DIR": str(self.dir), "HOME": str(self.dir)}
        found = shutil.which("bash")
        assert found is not None, "these tests paste into bash"
        self.bash = found

    def parses(self, line: str) -> bool:
        done = subprocess.run([self.bash, "-n", "-c", line], env=self.env, capture_output=True, check=False)
        return done.returncode == 0

    def longest_command(self, line: str) -> str:
        """The longest start of ``line``, cut at a space, that bash reads as shell code: all
        that pasting the line could run (the prose after a command is no shell code)."""
        words = line.split(" ")[:40]
        for end in range(len(words), 0, -1):
            if self.parses(" ".join(words[:end])):
                return " ".join(words[:end])
        raise AssertionError(f"no start of {line!r} is shell code")

    def shortest_command(self, line: str) -> str:
        """The shortest start of ``line``, cut at a space, that bash reads as shell code: the
        one word a setting (``NAME=VALUE``) is."""
        words = line.split(" ")
        for end in range(1, len(words) + 1):
            if self.parses(" ".join(words[:end])):
                return " ".join(words[:end])
        raise AssertionError(f"no start of {line!r} is shell code")

    def paste(self, line: str, then: str = "") -> list[str]:
        """Run ``line`` (and ``then``) and return the stub's arguments; assert it ran once,
        that nothing else was run, and that no payload ran."""
        for name in ("calls", "args", "others"):
            (self.dir / name).unlink(missing_ok=True)
        done = subprocess.run(
            [self.bash, "--norc", "--noprofile", "-c", f"{_STUB}\n{line}{then}"],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            check=False,
        )
        assert not (self.dir / MARKER).exists(), f"pasting {line!r} ran the file's command"
        assert done.returncode == 0, (line, done.stderr)
        assert not (self.dir / "others").exists(), (line, (self.dir / "others").read_text())
        assert (self.dir / "calls").read_text() == "call\n", line
        raw = (self.dir / "args").read_bytes()
        return [os.fsdecode(word) for word in raw.split(b"\0")[:-1]]


@pytest.mark.slow
def test_each_doctor_command_pasted_runs_only_compiletrace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    bash = Bash(tmp_path)
    seen = set()
    for views in _doctor_views(tmp_path, capsys):
        for view, line in _apply_commands(views):
            command = bash.longest_command(line)
            args = bash.paste(command)  # only the stub ran, whatever the prose around it
            assert args[:2] == ["run", "--apply"], (view, command)
            seen.add((view, args[2]))
    # Each view printed the command for the input torch does name, and pasting it gives it.
    fix = f"mark-dynamic={LEGIT_SOURCE}"
    assert {("text", fix), ("html", fix), ("json", fix)} <= seen


@pytest.mark.slow
def test_each_cache_setting_pasted_sets_the_directory_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    bash = Bash(tmp_path)
    for (base, current), value in zip(_why_files(tmp_path), (CACHE_DIR, VLLM_ROOT), strict=True):
        views = _views("why", [base, current], tmp_path, capsys)
        pasted = [
            (view, line[m.start() :], m[1]) for view, line in _lines(views) for m in _SETTING.finditer(line)
        ]
        assert {view for view, _, _ in pasted} == {"text", "html", "json"}
        for view, line, name in pasted:
            setting = bash.shortest_command(line)
            assert bash.paste(setting, f'; compiletrace "${name}"') == [value], (view, setting)


@pytest.mark.slow
def test_the_plans_line_pasted_runs_the_verified_command(tmp_path: Path) -> None:
    bash = Bash(tmp_path)
    for plan in (_plan(), _plan(never_ready=True)):
        for line in (plan.line(), plan.to_dict()["command"], json.loads(json.dumps(plan.to_dict()))["line"]):
            command = line[line.index("compiletrace run") :]
            assert bash.parses(command)
            assert bash.paste(command) == _expected()[1:]
