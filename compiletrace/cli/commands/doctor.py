"""``compiletrace doctor``: why a saved run's compile time went where it went and what to
change; with ``--verify``, the advice proved by re-running the command once per fix."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

from compiletrace._io.errors import UsageError
from compiletrace._io.files import write_json, write_text
from compiletrace._io.text import printable
from compiletrace.cli.exit_codes import EXIT_FAILED, EXIT_OK
from compiletrace.cli.options import add_trace_components, check_outputs, check_seconds, prints_text
from compiletrace.cli.parsing import PROG, add_common_options, decimal, whole_number

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Diagnose a run saved by 'profile --json' (recompiles and their failed guards, graph\n"
    "breaks, repeated graphs, cache misses and expensive hits, compiles after warm-up, shared\n"
    "frames), a job saved by 'run --json' (each process's findings, named by process) or a\n"
    "gathered multi-rank result (ranks that diverge). Prints each finding with its\n"
    "evidence and fix, most seconds at stake first. Exit status: 0, or 1 when a finding of a\n"
    "--fail-on kind is present; 2 for bad input."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    parser.add_argument(
        "run",
        metavar="RUN",
        nargs="+",
        help="a run saved by 'profile --json', a job saved by 'run --json', a gathered result, or\n"
        "torch's trace (a TORCH_TRACE directory, log, .gz or .zip); several jobs (each node's of one\n"
        "job), or a directory of them, are read as one job, its nodes compared with each other",
    )
    add_trace_components(parser)
    parser.add_argument(
        "--baseline",
        metavar="BASE",
        help="a run of the same program that hit the cache (a run, a job or torch's trace): each\n"
        "cache miss of RUN is explained by the part of its key that changed ('compiletrace why')",
    )
    parser.add_argument("--json", metavar="OUT", help="write the findings as versioned JSON ('-': stdout)")
    parser.add_argument(
        "--html",
        metavar="OUT",
        help="write the findings (and, with --verify, the before/after table) as a self-contained\nHTML page",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="prove the advice: re-run the job's command (or a profile run's MODEL, with its steady-\n"
        "state call timed) as it is and once per fix that applies with no edit (run --apply), each\n"
        "in fresh processes on an empty compile cache, in --rounds interleaved rounds, and print per\n"
        "finding frame compiles, compile CPU seconds, the seconds at stake and saved (median and\n"
        "spread, CPU and wall), the calibration and the verdict. It runs what the file names: give\n"
        "--trust for a file of your own",
    )
    parser.add_argument(
        "--rounds",
        type=whole_number,
        default=3,
        metavar="N",
        help="with --verify: run the program as it is and with each fix N times, interleaved (default\n"
        "3: a fix is verified only when its saving beats the rounds' spread; 1: counts only, a quick look)",
    )
    parser.add_argument(
        "--alternatives",
        action="store_true",
        help="with --verify: measure the other fixes a finding names too (dynamic shapes beside marking\n"
        "one dimension dynamic), each on a row of its own",
    )
    parser.add_argument(
        "--grace",
        type=decimal,
        default=3.0,
        metavar="S",
        help="with --verify: each run goes until the command is ready (its ready mark), then S\n"
        "seconds more (a compile right after ready is still seen), then it is stopped: SIGINT to\n"
        "its process group, SIGTERM, SIGKILL (default 3)",
    )
    parser.add_argument(
        "--ready-timeout",
        type=decimal,
        default=900.0,
        metavar="S",
        help="with --verify: a run not ready in S seconds is stopped; its fix is 'never ready in S s'\n"
        "(default 900); one whose ready marks still come S seconds after its first is stopped too",
    )
    parser.add_argument(
        "--jobs",
        type=whole_number,
        default=1,
        metavar="N",
        help="with --verify: run N trials of a round side by side (each on its own empty cache; the\n"
        "verdict rests on compile CPU seconds, which other work moves little); a server's each on a\n"
        "free port in place of the job's (default 1)",
    )
    parser.add_argument(
        "--budget",
        type=decimal,
        default=None,
        metavar="S",
        help="with --verify: start no round that would end past S seconds of the proof (a fix\n"
        "decided after two rounds runs no third either way); a run still going at S is stopped, and\n"
        "its fix is 'not judged'",
    )
    parser.add_argument(
        "--traffic",
        metavar="COMMAND",
        help="with --verify: the requests each trial gets once it is ready, as 'run --traffic' takes\n"
        "them (default: the job's own, recorded by 'run --traffic')",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="with --verify: run the command or MODEL the file names (a file can name any code)",
    )
    parser.add_argument(
        "--fail-on",
        metavar="KIND[,KIND]",
        help="exit 1 when a finding of one of these kinds is present (e.g. recompiles,graph_break)",
    )


def run(args: argparse.Namespace) -> int:
    from compiletrace._data.findings import FindingKind
    from compiletrace._data.kinds import FileKind
    from compiletrace._load import load
    from compiletrace.reports import findings_text

    known = [k.value for k in FindingKind]
    fail_on = {k.strip() for k in (args.fail_on or "").split(",") if k.strip()}
    if (args.fail_on is not None and not fail_on) or fail_on - set(known):
        bad = ", ".join(sorted(fail_on - set(known))) or repr(args.fail_on)
        raise UsageError(f"--fail-on: unknown finding kind {bad}; kinds: {', '.join(known)}")
    check_outputs(
        [(args.json, "--json"), (args.html, "--html")], inputs=[*args.run, *filter(None, [args.baseline])]
    )
    if args.trust and not args.verify:
        raise UsageError("--trust is for --verify, which runs the job's command")
    if args.baseline and args.verify:
        raise UsageError("--baseline compares two runs; --verify re-runs one: give one of them")
    if args.verify and len(args.run) > 1:
        raise UsageError("--verify re-runs one command on this machine: give one node's job, not several")
    if args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {args.rounds}")
    check_seconds(args.grace, "--grace", minimum=0.0)
    check_seconds(args.ready_timeout, "--ready-timeout", minimum=1.0)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if args.budget is not None:
        check_seconds(args.budget, "--budget", minimum=1.0)
    job = load(
        args.run[0] if len(args.run) == 1 else args.run,
        accept={FileKind.RUN, FileKind.GATHER, FileKind.JOB},
        command="compiletrace doctor",
        components=args.component,
    )
    assert not isinstance(job, list) and hasattr(job, "diagnose")
    if args.verify:
        return _verify(args, job, fail_on)
    findings = job.diagnose() if not args.baseline else _against_baseline(args, job)
    if _says(args):
        print(findings_text(findings))
    _write_findings(args, findings)
    return EXIT_FAILED if any(f.kind in fail_on for f in findings) else EXIT_OK


def _against_baseline(args: argparse.Namespace, job: Any) -> Any:
    from compiletrace._data.gather import GatherResult
    from compiletrace._data.kinds import FileKind
    from compiletrace._doctor import baseline_evidence, diagnose_against
    from compiletrace._load import load

    if isinstance(job, GatherResult):
        raise UsageError(
            f"{args.run[0]}: --baseline compares a run or a job with another; this is a gathered result"
        )
    base = load(
        args.baseline,
        accept={FileKind.RUN, FileKind.JOB},
        command="compiletrace doctor --baseline",
        components=args.component,
    )
    return diagnose_against(job, baseline_evidence(base))  # type: ignore[arg-type]


def _says(args: argparse.Namespace) -> bool:
    """Whether the doctor prints its text: not where --json or --html is standard output."""
    return prints_text([(args.json, "--json"), (args.html, "--html")])


def _write_findings(
    args: argparse.Namespace,
    findings: Any,
    verify: Any = None,
    plan: Any = None,
    differ: Sequence[str] = (),
    fixes: Sequence[dict[str, object]] = (),
) -> None:
    """The doctor's --json and --html outputs (``verify``: the before/after table; ``plan``:
    every verified fix together, measured, beside the findings in the JSON; ``differ``: how
    the trials differed from the job, as ``"trials_differ"``; ``fixes``: one entry per fix
    measured, as ``"fixes"``)."""
    from compiletrace._data.findings import doctor_dict
    from compiletrace.reports import doctor_html_report

    if args.json:
        data = doctor_dict(findings)
        if fixes:
            data["fixes"] = list(fixes)
        if plan is not None:
            data["plan"] = plan.to_dict()
        if differ:
            data["trials_differ"] = list(differ)
        write_json(args.json, data)
        if _says(args):
            print(f"wrote findings to {args.json}")
    if args.html:
        table = None if verify is None else (verify.header, verify.rows, verify.notes)
        write_text(args.html, doctor_html_report(findings, verify=table))
        if _says(args):
            print(f"wrote the HTML page to {args.html}")


def _check_traffic(job: Any, traffic: tuple[str, ...], source: str) -> None:
    """A server's compiles after ready came from requests: trials with no traffic get none,
    compile none of them, and would find nothing to change. Refused, with what to give."""
    from compiletrace._data.ready import PORT, parse_ready

    if traffic or not job.ready or parse_ready(job.ready).how != PORT:
        return
    after = job.after_ready()
    if after.count:
        raise UsageError(
            f"{source}: {after.count} compile{'s' if after.count != 1 else ''} came after the server was "
            f"ready ({job.ready}), from requests its trials would not get: give the requests that caused "
            "them, --traffic 'COMMAND' ({port} is its port), here or to 'compiletrace run' so the job "
            "records them"
        )


def _verify(args: argparse.Namespace, job: Any, fail_on: set[str]) -> int:
    from compiletrace._app.job import ProfileJob
    from compiletrace._app.profile_run import ProfileRun
    from compiletrace._app.progress import stderr_line
    from compiletrace._app.verify import (
        measure_plan,
        profile_command,
        trial_differences,
        verified_findings,
        verify_fixes,
        verify_job,
        verify_lines,
        verify_profile_run,
        verify_table,
    )
    from compiletrace._data.job import Job
    from compiletrace.reports import findings_text

    def progress(line: str) -> None:
        stderr_line(f"{PROG}: running {line}")  # whole, beside trials side by side

    profiled = isinstance(job, ProfileRun) and job.meta.source is None and job.meta.model is not None
    if not profiled and (not isinstance(job, Job) or not job.command):  # torch's trace, ranks
        raise UsageError(
            f"{args.run[0]}: --verify re-runs a job's command or a profile run's MODEL, and this file names "
            "neither; give a job saved by 'compiletrace run --json JOB.json -- COMMAND' or a run saved "
            "by 'compiletrace profile --json RUN.json'"
        )
    if profiled:
        command = profile_command(job.meta)  # a run whose options profile did not write: exit 2
        shown = f"the model {printable(command[4])}, imported from {printable(os.getcwd())}"
    else:
        shown = printable(" ".join(job.command)) + (f" in {printable(job.cwd)}" if job.cwd else "")
    if not args.trust:
        raise UsageError(
            f"{args.run[0]}: --verify would run what this file names ({shown}), and a file can "
            "name any code: give --trust if the file is your own"
        )
    from compiletrace._app.job import UntilReady, traffic_words

    traffic: tuple[str, ...] = ()
    if not profiled:
        ready = job.ready or None
        traffic = traffic_words(args.traffic, ready) if args.traffic is not None else job.traffic
        _check_traffic(job, traffic, args.run[0])
    elif args.traffic is not None:
        raise UsageError(
            "--traffic is for a job's command ('run --json'): a profile run's MODEL serves nothing"
        )
    until = UntilReady(grace_s=args.grace, timeout_s=args.ready_timeout, traffic=traffic)
    how = {"progress": progress, "rounds": args.rounds, "alternatives": args.alternatives}
    how.update(until_ready=until, jobs=args.jobs, budget_s=args.budget)
    began = time.monotonic()  # --budget bounds the fixes' rounds and the plan's together
    # A job's own findings, diagnosed once: judged by verify, and set beside its trials'.
    job_findings = None if profiled else ProfileJob.of(job).diagnose()
    verdicts = (
        verify_profile_run(job.meta, cwd=os.getcwd(), **how)
        if profiled
        else verify_job(job, findings=job_findings, **how)
    )
    findings = verified_findings(verdicts)
    # A profile run's MODEL takes no --apply: the plan is a job's command's.
    plan, notes = None, []
    if not profiled:
        if verdicts:
            notes = trial_differences(job_findings or [], len(job.records()), verdicts[0].before)
        plan = measure_plan(
            verdicts,
            job.command,
            cwd=job.cwd or None,
            ready=job.ready or None,
            until_ready=until,
            progress=progress,
            rounds=args.rounds,
            jobs=args.jobs,
            budget_s=None if args.budget is None else args.budget - (time.monotonic() - began),
        )
    if _says(args):
        print(findings_text(findings))
        print()
        print("\n".join(verify_lines(verdicts, notes)))
        if plan is not None:
            print(plan.line())
    table = verify_table(verdicts, notes) if verdicts else None
    _write_findings(args, findings, table, plan, notes, verify_fixes(verdicts))
    return EXIT_FAILED if any(f.kind in fail_on for f in findings) else EXIT_OK
