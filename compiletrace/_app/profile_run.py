"""A profiled start-up with its views: :class:`ProfileRun`, what ``compiletrace.profile()``
returns and what ``compiletrace.load`` gives back for a run file. Torch-free: a saved run is
read, rendered and diagnosed without torch (``compiletrace report``, ``doctor``); running a
model is :mod:`compiletrace._app.profile`'s.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from compiletrace._data.files import read
from compiletrace._data.kinds import FileKind
from compiletrace._data.run import Run

if TYPE_CHECKING:
    from compiletrace._data.findings import Finding

__all__ = ["ProfileRun"]


class ProfileRun(Run):
    """One profiled start-up (the plain data of :class:`compiletrace._data.run.Run`: the
    graph records, the warm-up result, how it was run, and the start-up timeline from the
    process's start to the end of the run), with its views: text (:meth:`summary`), a
    self-contained HTML page (:meth:`html`), the doctor's findings (:meth:`diagnose`) and,
    in a notebook, HTML tables and a chart. Saves to versioned JSON (:meth:`save`) and
    reads back with :meth:`load` or :func:`compiletrace.load`.

    >>> from compiletrace._app.profile import profile
    >>> run = profile(backend="eager")
    >>> sorted(run.by_component())
    ['encoder', 'language_model']
    >>> ProfileRun.from_dict(run.to_dict()).records() == run.records()
    True
    >>> tl = run.timeline
    >>> tl is not None and tl.total_ns == sum(e.counted_ns for e in tl.top_level())
    True
    """

    def __repr__(self) -> str:
        # Short, like the registry's: the records' nanoseconds and paths are for to_dict().
        parts = ", ".join(f"{name}={s:.3f}s" for name, s in self.by_component().items())
        model = self.meta.model or "?"
        return f"<ProfileRun {model}: {len(self.graph_records)} graphs{': ' + parts if parts else ''}>"

    @classmethod
    def of(cls, run: Run) -> ProfileRun:
        """The same run, with its views."""
        return cls(run.graph_records, run.warmup, run.meta, run.timeline, run.runtime_events)

    def diagnose(self) -> list[Finding]:
        """The doctor's findings on this run: why its compile time went where it went and
        what to change, most seconds at stake first (see :func:`compiletrace.diagnose`).

        >>> import torch
        >>> from compiletrace._app.profile import profile
        >>> torch._dynamo.reset()  # a second run in one process would recompile the first's frames
        >>> [f.kind for f in profile(backend="eager").diagnose()]
        []
        """
        from compiletrace._doctor import diagnose_evidence, gather_evidence

        return diagnose_evidence(gather_evidence(self))

    def summary(self) -> str:
        """The header (model, backend, versions, cache state), the text tables and the
        one-line summary; in compilation mode none, the eager baseline instead."""
        from compiletrace.reports import summary_table

        return summary_table(self)

    def html(self, title: str = "compiletrace report") -> str:
        """The one-file HTML report (no network access needed to view it)."""
        from compiletrace.reports import html_report

        return html_report(self, title=title, findings=self.diagnose())

    def _repr_html_(self) -> str:
        from compiletrace.reports import report_fragment

        return report_fragment(self, findings=self.diagnose())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProfileRun:
        """Read a run saved by :meth:`save` (through the one reader of compiletrace's
        files); raises :class:`~compiletrace.RunFileError` for a file that is not one."""
        run = read(path, accept={FileKind.RUN}, command="ProfileRun.load")
        assert isinstance(run, Run)
        return cls.of(run)
