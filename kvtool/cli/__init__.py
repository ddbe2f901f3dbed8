"""The command line: thin wiring from options to library calls to rendered output.

Start-up matters (``kvtool size`` must feel instant; benchmarks/startup measures it), so:
command modules import the planners inside the functions that need them, ``render`` imports
result types only for type checking, and command modules do not use
``from __future__ import annotations`` (typer would evaluate every string annotation of every
command on each run, about 5 ms).
"""
