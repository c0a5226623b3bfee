"""The subcommands of ``unfold-bench``, one module each: its docstring's first line is its summary in
``unfold-bench --help`` and its ``main(argv)`` the entry (``unfold_bench.cli`` dispatches). Nothing here imports
torch: the GPU check's ``run`` starts on a machine that has none yet."""
