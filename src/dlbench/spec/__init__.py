"""What is measured: the Case and Settings records and the name tables (plain data).

The lowest layer above errors and measure: every other room reads these, and
they import nothing of dlbench but errors, untyped and measure.
"""
