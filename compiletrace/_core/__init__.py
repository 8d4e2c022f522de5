"""The torch-facing core: torch's compile events become immutable records in a registry.

``torch_compat`` holds every private torch API; ``tracker`` turns events into records;
``backend`` and ``compile`` are the entry points; ``recorder`` records start-up phases;
``records``, ``registry``, ``phases`` and ``timeline`` are plain data, free of torch (views
may import them). Importing this package loads nothing: each module is imported by name.
"""
