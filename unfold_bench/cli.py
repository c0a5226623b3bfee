"""``unfold-bench``: the project's command, one subcommand per job; ``unfold-bench COMMAND --help`` is its reference.

Each subcommand is a module of ``unfold_bench.commands`` with a ``main(argv)``; its docstring's first line is its
summary here. The make targets call the same subcommands. ``unfold-bench advise`` says which strategy to ship for
your own layers.
"""

from __future__ import annotations

import ast
import importlib
import sys
import traceback
from pathlib import Path

VARIABLE = "UNFOLD_BENCH_STRATEGIES"  # impls.plugins.VARIABLE, not imported: importing impls loads the registry
# command name -> its module in unfold_bench.commands, in the order ``--help`` lists them
COMMANDS = {
    "advise": "advise",
    "bench": "bench",
    "report": "report",
    "summary": "summary",
    "regress": "regress",
    "validate-gate": "validate_gate",
    "variance": "variance",
    "stability": "stability",
    "cost": "cost",
    "agreement": "agreement",
    "context": "context",
    "capabilities": "capabilities",
    "memprofile": "memory_profile",
    "build-cpp": "build_cpp",
    "gpu-check": "gpu_check",
    "mutation-check": "mutation_check",
}
COMMANDS_DIR = Path(__file__).parent / "commands"


def summary(command: str) -> str:
    """The first line of ``command``'s module docstring (read, not imported: most commands import torch)."""
    doc = ast.get_docstring(ast.parse((COMMANDS_DIR / f"{COMMANDS[command]}.py").read_text())) or ""
    return doc.splitlines()[0] if doc else ""


def _usage() -> str:
    lines = ["usage: unfold-bench [--strategy MODULE:ATTRIBUTE ...] COMMAND [--help | options]", "", "commands:"]
    lines += [f"  {name:<15}{summary(name)}" for name in COMMANDS]
    lines += [
        "",
        "--strategy MODULE:ATTRIBUTE (repeatable) adds your own unfold, a callable with F.unfold's signature or a",
        "Strategy, to every command and every process it starts (docs/your-own-unfold.md).",
    ]
    return "\n".join(lines)


def outside_strategies(argv: list[str]) -> list[str]:
    """``argv`` without its leading ``--strategy MODULE:ATTRIBUTE`` options, which are added to
    ``$UNFOLD_BENCH_STRATEGIES`` (``impls.plugins``) before anything imports the registry."""
    import os

    specs = []
    while argv and (argv[0] == "--strategy" or argv[0].startswith("--strategy=")):
        if argv[0] == "--strategy":
            if len(argv) < 2:
                raise SystemExit("unfold-bench: error: --strategy needs MODULE:ATTRIBUTE")
            specs.append(argv[1])
            argv = argv[2:]
        else:
            specs.append(argv[0].split("=", 1)[1])
            argv = argv[1:]
    for spec in specs:
        if ":" not in spec:
            raise SystemExit(f"unfold-bench: error: --strategy {spec!r}: expected MODULE:ATTRIBUTE")
    if specs:
        os.environ[VARIABLE] = ",".join([*filter(None, os.environ.get(VARIABLE, "").split(",")), *specs])
    return argv


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit status. A usage error of the shared options, or a command that cannot
    be loaded, exits 2, as argparse's usage errors do: never 1, which ``regress`` gives to a regression."""
    try:
        argv = outside_strategies(sys.argv[1:] if argv is None else argv)
    except SystemExit as refused:
        print(refused.code, file=sys.stderr)
        return 2
    if argv and argv[0] in COMMANDS:
        try:
            module = importlib.import_module(f"unfold_bench.commands.{COMMANDS[argv[0]]}")
        except Exception:
            traceback.print_exc()
            print(f"unfold-bench: error: the command {argv[0]!r} could not be loaded (above)", file=sys.stderr)
            return 2
        try:
            return module.main(argv[1:])
        except SystemExit as done:  # argparse's --help and errors, or a command's own message
            if isinstance(done.code, int) or done.code is None:
                return done.code or 0
            print(done.code, file=sys.stderr)
            return 1
    if argv and argv[0] not in ("-h", "--help"):
        print(f"unfold-bench: error: unknown command {argv[0]!r}", file=sys.stderr)
    print(_usage(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
    return 0 if argv and argv[0] in ("-h", "--help") else 2


if __name__ == "__main__":
    raise SystemExit(main())
