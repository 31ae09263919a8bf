"""Launching cases: one fresh worker process per case, and the run session."""
