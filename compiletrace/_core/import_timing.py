"""The front door's first import, for the start-up timeline: importing the timeline notes
when ``import compiletrace`` began; then torch is imported here, on its own, so that its
import (most of the seconds ``import compiletrace`` takes) is an entry of its own.

When torch was imported before compiletrace this costs nothing, and the timeline says so.
"""

from __future__ import annotations

from compiletrace._core import startup

# isort: split
import torch  # noqa: F401  (imported to be timed: everything below the front door needs it)

startup.mark_import("import torch")
