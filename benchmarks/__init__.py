"""Reusable benchmarks, one module each: ``python -m benchmarks.NAME --help``; results under ``benchmarks/results/``."""
