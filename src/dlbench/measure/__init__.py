"""Measurement: the timer (stop rule), statistics, and process monitoring."""
