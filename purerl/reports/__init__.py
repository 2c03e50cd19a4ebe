"""Finished runs read back, grouped, their statistics and the markdown report, in numpy without
JAX."""
