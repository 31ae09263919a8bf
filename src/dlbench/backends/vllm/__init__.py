"""vLLM as a dlbench engine: its server, started and measured by the worker."""
