"""Measurement: the timer (stop rule), statistics, process monitoring, energy, and the
instruments that bracket every measured region (instruments)."""
