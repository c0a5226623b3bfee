"""The ``unfold-bench`` command (``unfold_bench.cli``)."""
