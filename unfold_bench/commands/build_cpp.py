"""Build the cpp strategy's kernel now, or load it from the cache (impls/cpp.py), and say where and how long.

Exit status 0 also when this machine cannot build it (the strategy then refuses every input, saying why).
"""

from __future__ import annotations

from impls import cpp


def main() -> None:
    if cpp.MISSING_REQUIREMENT is not None:
        print(f"cpp strategy not built: it needs {cpp.MISSING_REQUIREMENT}")
        return
    seconds = cpp.build()
    print(f"cpp strategy's kernel ready in {cpp.build_directory()} ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
