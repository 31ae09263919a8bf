"""Real data sets for accuracy workloads: MNIST IDX files and a synthetic stand-in."""
