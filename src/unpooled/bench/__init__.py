"""Benchmarks runnable from the CLI (``unpooled bench ...``); each prints its figures."""
