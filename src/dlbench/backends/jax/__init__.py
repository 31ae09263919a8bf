"""JAX: jit-compiled ports of the reference models."""
