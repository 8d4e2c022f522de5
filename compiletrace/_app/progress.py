"""A one-line progress display on stderr: what is running and for how long.

Quiet unless the stream is a terminal, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Redraws ``<label>  <elapsed> s`` every ``interval_s`` until closed.

    >>> import io
    >>> with Progress(io.StringIO()) as p:  # not a terminal: draws nothing
    ...     p.set("compiling encoder")
    >>> p.enabled
    False
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None, interval_s: float = 0.2):
        self._stream = stream if stream is not None else sys.stderr
        isatty = getattr(self._stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) if enabled is None else enabled
        self._interval_s = interval_s
        self._label = ""
        self._start = time.perf_counter()
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
        """Show ``label``; the elapsed time restarts from zero when the label changes."""
        with self._lock:
            if label != self._label:
                self._start = time.perf_counter()
            self._label = label
        self._draw()

    def note(self, line: str) -> None:
        """Print a permanent line above the progress line."""
        if not self.enabled:
            return
        with self._lock:
            self._stream.write("\r" + " " * self._width + "\r" + line + "\n")
            self._width = 0
            self._stream.flush()
        self._draw()

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
            text = f"{self._label}  {time.perf_counter() - self._start:6.1f} s"
            pad = max(0, self._width - len(text))
            self._stream.write("\r" + text + " " * pad)
            self._width = len(text)
            self._stream.flush()
