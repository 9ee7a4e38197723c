"""agentlab's own benchmarks: how much the library adds to the agent loop.

Run with ``make bench`` (``python -m benchmarks``). Every workload uses an
instant offline model, so each measured microsecond is the library's own.
The machines are shared and noisy, so every figure is a median over
repetitions, and the headline figures are ratios against a bare loop timed
in the same run, never a lone absolute time.

Not part of ``make test``: tests/test_benchmarks_smoke.py only checks that
this code runs at tiny sizes and produces every row.
"""
