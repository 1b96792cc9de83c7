"""Everything that writes or reads a run directory: evaluate, replay, rerun, diff, audit."""
