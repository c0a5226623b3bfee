"""Build the cpp strategy's kernel now, or load it from the cache (impls/cpp.py), and say where and how long.

Exit status 0 also when this machine cannot build it (the strategy then refuses every input, saying why).
"""

from __future__ import annotations

from collections.abc import Sequence

from unfold_bench.common_args import command_parser


def main(argv: Sequence[str] | None = None) -> int:
    command_parser("build-cpp", __doc__).parse_args(argv)
    from impls import cpp

    if cpp.MISSING_REQUIREMENT is not None:
        print(f"cpp strategy not built: it needs {cpp.MISSING_REQUIREMENT}")
        return 0
    seconds = cpp.build()
    print(f"cpp strategy's kernel ready in {cpp.build_directory()} ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
