"""The data compiletrace records, saves and reads back: plain, immutable, free of torch.

Every file format lives here and only here, each read by one function that checks every
field (see :mod:`compiletrace._data.files`); the capture side (``_core``) fills these types
from torch's events, and the views (``reports``, ``telemetry``) and the applications read
them. Modules:

- ``kinds``: every kind of file, with its schema versions (what each added) and what
  writes it; a field added to a file is a new version there;
- ``run_meta``: how a run was made, typed (:class:`RunMeta`), read field by field;
- ``findings``: what the doctor found (:class:`Finding`, :class:`FindingKind`);
- ``fixes``: the fixes ``run --apply`` makes with no edit (:class:`Fix`), each saying what
  it does and how to keep it in code;
- ``torch_text``: every name and message format of torch's compiletrace reads (regions,
  resume functions, failed guards, graph-break reasons), with a contract test per torch;
- ``cache_hits``: which cache hits still compiled (a reading of records);
- ``gather``: one rank's figures and a multi-rank job's (:class:`RankTimes`,
  :class:`GatherResult`);
- ``files``: the one reader of every file compiletrace writes.
"""
