"""Measure the regression gate on this machine: its false-alarm rate (A/A) and whether it catches injected
regressions. The numbers in the README's "Regression gate" section come from here.

In a temporary clone of this repository it makes two commits on top of HEAD:

- ``A/A``: a commit that changes no code under test (a comment in the README), so HEAD vs it must pass;
- ``injected``: ``tiling`` does an extra in-place pass over its output (clearly slower; the same forward
  memory, but the backward of the in-place multiply makes a new output-sized gradient) and
  ``as_strided`` allocates and fills a scratch buffer half its output's size (net peak +50% of the output).

Then it runs ``scripts/regress.py`` ``--aa`` times on the A/A pair and ``--injected`` times on the injected
pair, and prints, per run, the exit status and which cells were flagged; then the false-alarm rate (flagged
cells / compared cells, over the A/A runs) and the catch rate (runs that flagged both injected cells, and
nothing else). It takes a few minutes per run; use ``--bench`` to choose the cells.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOWER_TILING = """

def _injected_slower(input, geometry):  # injected regression (scripts/validate_gate.py)
    return _tiling_unfold(input, geometry).mul_(1.0)


unfold = dataclasses.replace(unfold, implementation=_injected_slower)
"""
HUNGRIER_AS_STRIDED = """

def _injected_hungrier(input, geometry):  # injected regression (scripts/validate_gate.py)
    out = _as_strided_unfold(input, geometry)
    scratch = torch.empty(out.numel() // 2, dtype=out.dtype, device=out.device).fill_(0)
    del scratch
    return out


unfold = dataclasses.replace(unfold, implementation=_injected_hungrier)
"""


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


def _implementation_name(path: Path) -> str:
    return re.search(r"implementation=(\w+)", path.read_text()).group(1)


def make_clone(workdir: Path) -> tuple[Path, str, str, str]:
    """A clone with (base, a/a, injected) commits; returns the clone and the three hashes."""
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for key, value in (("user.name", "gate validation"), ("user.email", "gate@localhost")):
        subprocess.run(["git", "config", key, value], cwd=clone, check=True)
    base = _run(["git", "rev-parse", "HEAD"], clone).stdout.strip()
    readme = clone / "README.md"
    readme.write_text(readme.read_text() + "\n<!-- A/A commit: no code under test changes -->\n")
    subprocess.run(["git", "commit", "-qam", "A/A: no code under test changes"], cwd=clone, check=True)
    same = _run(["git", "rev-parse", "HEAD"], clone).stdout.strip()
    subprocess.run(["git", "checkout", "-q", base], cwd=clone, check=True)
    for module, text in (("tiling", SLOWER_TILING), ("as_strided", HUNGRIER_AS_STRIDED)):
        path = clone / "impls" / f"{module}.py"
        inner = _implementation_name(path)
        source = path.read_text() + "\nimport dataclasses  # noqa: E402\n\nimport torch  # noqa: E402\n"
        body = text.replace("_tiling_unfold", inner).replace("_as_strided_unfold", inner)
        path.write_text(source + body)
    subprocess.run(["git", "commit", "-qam", "injected regressions"], cwd=clone, check=True)
    injected = _run(["git", "rev-parse", "HEAD"], clone).stdout.strip()
    return clone, base, same, injected


def flagged(output: str) -> list[str]:
    """The cells the gate's table lists as regressions or failures."""
    return [line.strip() for line in output.splitlines() if re.match(r"\s*(regression|failed)\s", line)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aa", type=int, default=3, help="A/A runs (3)")
    parser.add_argument("--injected", type=int, default=3, help="injected-regression runs (3)")
    parser.add_argument("--bench", default="example", help="cells to judge (regex; default: the example config)")
    parser.add_argument("--workdir", help="where to clone (default: a temporary directory)")
    args = parser.parse_args()

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gate-validation-"))
    clone, base, same, injected = make_clone(workdir)
    print(f"clone {clone}: base {base[:8]}, A/A {same[:8]}, injected {injected[:8]}", flush=True)
    gate = [sys.executable, "scripts/regress.py", "--bench", args.bench]
    aa_cells = aa_flagged = caught = 0
    for kind, head, runs in (("A/A", same, args.aa), ("injected", injected, args.injected)):
        for i in range(runs):
            done = _run([*gate, base, head], clone)
            cells = flagged(done.stdout)
            compared = re.search(r"Gate: (\d+) cells compared", done.stdout)
            print(f"{kind} run {i + 1}: exit {done.returncode}, {compared.group(1) if compared else '?'} cells, "
                  f"flagged {cells or 'nothing'}", flush=True)  # fmt: skip
            if done.returncode not in (0, 1):
                print(done.stdout[-3000:], done.stderr[-3000:])
            if kind == "A/A":
                aa_cells += int(compared.group(1)) if compared else 0
                aa_flagged += len(cells)
            else:
                hits = {c.split()[2] + " " + c.split()[3] for c in cells}
                caught += (
                    any("time_forward" in c and "tiling" in c for c in cells)
                    and any("net_peak_forward" in c and "as_strided" in c for c in cells)
                    and all("tiling" in h or "as_strided" in h for h in hits)
                )
    if args.aa:
        print(f"A/A: {aa_flagged} of {aa_cells} cell comparisons flagged ({aa_flagged / max(aa_cells, 1):.1%})")
    if args.injected:
        print(f"injected: {caught} of {args.injected} runs flagged both injected regressions and nothing else")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
