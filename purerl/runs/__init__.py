"""A run: the loop over chunks of updates, the events between them, compiling, the run directory,
signals, summary.json."""
