"""The bootstrap ``compiletrace run`` puts on ``PYTHONPATH`` (see ``sitecustomize.py``)."""
