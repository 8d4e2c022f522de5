"""The torch-free I/O leaf: exceptions, atomic file writes, the versioned JSON envelope and
the process state with its warnings. Imports nothing but the standard library, so every
other layer (core, views, applications) may use it."""
