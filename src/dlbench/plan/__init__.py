"""From a suite and the command line to a validated plan of cases (parent side)."""
