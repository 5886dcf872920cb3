"""Headless tick benchmarks (``manor bench``)."""
