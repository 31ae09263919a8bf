"""Workloads: framework-free descriptions of what is computed.

A workload owns its shapes, its FLOPs and bytes per sample, its seeded
reference weights and its synthetic inputs, all as NumPy arrays, so every
backend computes the same thing from the same numbers.
"""
