"""The null backend: a labelled harness self-test that measures dlbench's own overhead."""
