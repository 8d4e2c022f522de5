"""Progress on stderr: what is running and for how long.

On a terminal, one line redrawn in place; elsewhere (a CI log, a pipe), a plain line per
stage, as build tools print them. Also: how long this process has been running.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from compiletrace._core.observers import OnCompile
from compiletrace._data.records import GraphRecord
from compiletrace._io.text import printable

__all__ = ["STDERR_LINES", "Progress", "compile_lines", "process_start_unix_s", "stderr_line", "wall_time_s"]

# Held while a whole line goes to this process's stderr: progress lines and the output of
# trials side by side (doctor --verify --jobs N) each land on lines of their own.
STDERR_LINES = threading.Lock()


def stderr_line(text: str) -> None:
    """Write ``text`` and its newline to this process's stderr, whole and flushed at once,
    never between the parts of another thread's line (a trial's output copied to file
    descriptor 2 waits for the same lock)."""
    stream = sys.stderr
    if stream is None:
        return
    with STDERR_LINES:
        stream.write(text + "\n")
        stream.flush()


class Progress:
    """Redraws ``<label>  <elapsed> s`` every ``interval_s`` until closed (``enabled``, by
    default when the stream is a terminal); else, when ``plain`` (by default), writes a
    line when a stage starts (``<label> ...``) and each :meth:`note`. ``clock`` (seconds,
    monotonic) times the stages; tests pass a fake one to read exact figures.

    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(out) as p:  # not a terminal: plain lines
    ...     p.set("cold 1/3")
    ...     p.note("cold 1/3 finished in 9.10 s")
    >>> p.enabled, p.plain
    (False, True)
    >>> print(out.getvalue(), end="")
    cold 1/3 ...
    cold 1/3 finished in 9.10 s
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool | None = None,
        plain: bool | None = None,
        interval_s: float = 0.2,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self._stream = stream if stream is not None else sys.stderr
        isatty = getattr(self._stream, "isatty", None)
        try:
            tty = bool(isatty and isatty())
        except (OSError, ValueError):  # a closed or detached stream
            tty = False
        self.enabled = tty if enabled is None else enabled
        # Plain lines stand in for the redrawn one where it cannot be drawn, never beside it.
        self.plain = (not self.enabled) if plain is None else (plain and not self.enabled)
        self._interval_s = interval_s
        self._clock = clock
        self._label = ""
        self._start = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="compiletrace-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def set(self, label: str) -> None:
        """Show ``label``; the elapsed time restarts from zero when the label changes (and
        in plain mode, a line ``<label> ...`` says the stage started)."""
        with self._lock:
            changed = label != self._label
            if changed:
                self._start = self._clock()
            self._label = label
            if self.plain and changed and label:
                self._stream.write(f"{label} ...\n")
                self._stream.flush()
        self._draw()

    def note(self, line: str) -> None:
        """Print a permanent line (above the progress line on a terminal). It ends the
        current stage: nothing is redrawn until the next :meth:`set`, so a finished
        stage's label never shows as if it were still running."""
        with self._lock:
            self._label = ""
            if self.enabled:
                self._stream.write("\r" + " " * self._width + "\r" + line + "\n")
                self._width = 0
            elif self.plain:
                self._stream.write(line + "\n")
            else:
                return
            self._stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.enabled:
            with self._lock:
                self._stream.write("\r" + " " * self._width + "\r")
                self._stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._draw()

    def _draw(self) -> None:
        if not self.enabled or self._stop.is_set():
            return
        with self._lock:
            if not self._label:
                return
            text = f"{self._label}  {self._clock() - self._start:6.1f} s"
            pad = max(0, self._width - len(text))
            self._stream.write("\r" + text + " " * pad)
            self._width = len(text)
            self._stream.flush()


def compile_lines(progress: Progress) -> OnCompile:
    """An observer of compiles (``compiletrace._core.observers``) that notes a line on
    ``progress`` as each frame compile finishes: what compiled, how long it took, what the
    cache did (lazy backward compiles add no line).

    >>> import io
    >>> from compiletrace._core.observers import Observers
    >>> from compiletrace._data.registry import Registry
    >>> out, observers = io.StringIO(), Observers()
    >>> observers.add(compile_lines(Progress(out)))
    >>> record = GraphRecord("0/0", "encoder", "eager", "forward", 4, 0, 2 * 10**9, 10**9, 10**9, 10**9)
    >>> observers.record_finished(record, observers.frame_started(), Registry())
    >>> print(out.getvalue(), end="")
    compiled encoder 0/0 (forward) in 2.00 s, cache none
    """

    def compiled(record: GraphRecord, backward: bool) -> None:
        if not backward:
            progress.note(
                f"compiled {printable(record.component)} {record.compile_id} ({printable(record.code_name)})"
                f" in {record.total_s:.2f} s, cache {record.cache_outcome.value}"
            )

    return OnCompile(compiled)


def process_start_unix_s() -> float | None:
    """When this process started (Unix seconds), from ``/proc``; None where there is none.

    Linux gives the start time in clock ticks since boot (``/proc/self/stat``, field 22).
    Since-boot seconds now come from ``/proc/uptime`` (hundredths of a second); the boot
    time in ``/proc/stat`` (``btime``, whole seconds) is the fallback, up to a second early.

    >>> started = process_start_unix_s()
    >>> started is None or 0 < time.time() - started < 10 * 24 * 3600
    True
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            stat = f.read()
        # Field 2, the command name, is in parentheses and may hold spaces or ")": the
        # fields after the last ")" start at field 3, so field 22 is the 20th of them.
        start_ticks = int(stat.rpartition(")")[2].split()[19])
        since_boot_s = start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open("/proc/uptime", encoding="ascii") as f:
            uptime_s = float(f.read().split()[0])
        return time.time() - (uptime_s - since_boot_s)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/proc/stat", encoding="ascii") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return btime + since_boot_s
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def wall_time_s(fallback_start_unix_s: float) -> tuple[float, bool]:
    """(seconds this process has run, True), or where the process start time cannot be
    read, (seconds since ``fallback_start_unix_s``, False).

    >>> seconds, since_process_start = wall_time_s(time.time())
    >>> seconds >= 0
    True
    """
    started = process_start_unix_s()
    if started is None:
        return max(0.0, time.time() - fallback_start_unix_s), False
    return max(0.0, time.time() - started), True
