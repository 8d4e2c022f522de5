"""compiletrace's version: a leaf every layer may import (the tracer carries it too)."""

__version__ = "0.1.0"
