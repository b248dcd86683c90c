"""Benchmark helpers that need more than one process: the emulated bandwidth-limited cluster."""
