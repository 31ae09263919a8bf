"""Backends: one module per framework behind the small `Backend` interface."""
