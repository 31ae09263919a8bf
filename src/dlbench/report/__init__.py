"""Reports: built only from stored results, never from live backends."""
