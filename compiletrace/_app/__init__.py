"""The applications on top of the core and the views: the warm-up guard, profiling a model,
portable caches, comparing runs, reading records for what they mean, progress display."""
