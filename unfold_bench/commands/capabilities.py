"""Measure the capability matrix on this machine and write it for the site: part of `make bench`.

Every registered strategy, every capability of ``impls.capabilities`` (autograd to second order, forward-mode AD,
vmap, per-sample gradients, ``torch.compile``, an empty batch, layouts, dtypes) on every device: ``works``,
``declared defect: ...``, ``unsupported: ...`` or ``unverified: ...`` (a device this machine does not have).
Written to ``reports/capabilities/<machine>.json`` with the commit, torch version and date; the site shows the
newest file of each machine on its which-to-ship page. The test suite checks the same cells
(``tests/test_capabilities.py``).

``--strategies`` checks only the strategies named (your own, say) and merges their rows into the machine's record
when that record was taken with the same torch and capabilities: every other row is kept with the commit it was
checked at (``checked_at``), which the site shows; a record of another torch is replaced, not mixed.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.trees import ROOT, head_commit
from unfold_bench.common_args import add_commit, command_parser, output_file, output_folder, refuse_unkept_strategies


def merged(earlier: dict, new: dict, order: list[str]) -> tuple[dict, str]:
    """``new``'s rows merged into the ``earlier`` record of the same machine, and what was kept, said in words.

    The earlier rows of strategies not checked now are kept, with the commit each was checked at, when both records
    were taken with the same torch and the same capabilities; otherwise the earlier record is dropped whole."""
    if earlier.get("torch") != new["torch"] or earlier.get("capabilities") != new["capabilities"]:
        return new, f"; the earlier record (torch {earlier.get('torch')}) was replaced, not merged"
    cells, checked_at, kept = {}, {}, set()
    for device in dict.fromkeys([*earlier["cells"], *new["cells"]]):
        old_rows, new_rows = earlier["cells"].get(device, {}), new["cells"].get(device, {})
        old_at = earlier.get("checked_at", {}).get(device, {})
        rows = {**old_rows, **new_rows}
        names = sorted(rows, key=lambda n: order.index(n) if n in order else len(order))
        cells[device] = {n: rows[n] for n in names}
        checked_at[device] = {
            n: new["checked_at"][device][n] if n in new_rows else old_at.get(n, earlier["commit"]) for n in names
        }
        kept |= set(old_rows) - set(new_rows)
    others = f"{len(kept)} other {'strategy' if len(kept) == 1 else 'strategies'}"
    said = f"; rows of {others} kept from earlier commits" if kept else ""
    return {**new, "cells": cells, "checked_at": checked_at}, said


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("capabilities", __doc__)
    parser.add_argument(
        "--out", type=output_folder, default=str(ROOT / "reports" / "capabilities"), help="directory to write into"
    )
    parser.add_argument("--devices", default="cpu,cuda", help="comma-separated devices to check (default cpu,cuda)")
    add_commit(parser)
    parser.add_argument(
        "--strategies",
        help="comma-separated strategies to check (default: every one); their rows are merged into this machine's "
        "record, the others kept with the commit they were checked at",
    )
    args = parser.parse_args(argv)
    refuse_unkept_strategies(parser)

    import torch

    from benchmarks.machine import machine_name
    from impls import PLUGIN_PROBLEMS, STRATEGIES
    from impls.capabilities import CAPABILITIES, matrix
    from impls.plugins import describe

    for line in describe(STRATEGIES, PLUGIN_PROBLEMS):
        print(line, flush=True)
    chosen = dict(STRATEGIES)
    if args.strategies is not None:
        names = [n for n in args.strategies.split(",") if n]
        unknown = [n for n in names if n not in STRATEGIES]
        if unknown or not names:
            parser.error(
                f"--strategies {args.strategies!r}: unknown {', '.join(map(repr, unknown)) or 'empty'}; "
                f"known: {', '.join(STRATEGIES)}"
            )
        chosen = {n: s for n, s in STRATEGIES.items() if n in names}

    started = time.monotonic()
    commit = args.commit or head_commit()
    machine = machine_name()
    path = Path(args.out) / f"{machine}.json"
    try:  # the machine's own file there, before the checks it would hold; the folder is made when it is written
        output_file(str(path))
    except argparse.ArgumentTypeError as error:
        parser.error(f"--out {args.out}: {error}")
    earlier = None  # the record the checked rows are merged into, read before the checks it would hold
    if args.strategies is not None and path.exists():
        try:
            earlier = json.loads(path.read_text())
            if not isinstance(earlier, dict) or not isinstance(earlier.get("cells"), dict):
                raise ValueError("no 'cells' in it")
        except (OSError, ValueError) as error:
            parser.error(
                f"--strategies {args.strategies!r}: this machine's record {str(path)!r}, which the rows checked are "
                f"merged into, cannot be read ({error}); move it away, or check every strategy to write it afresh"
            )
    try:
        cells = matrix(chosen, tuple(args.devices.split(",")))
    except ValueError as error:
        parser.error(f"--devices {args.devices!r}: {error}")
    record = {
        "machine": machine,
        "commit": commit,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "capabilities": list(CAPABILITIES),
        "cells": cells,
        "checked_at": {device: dict.fromkeys(rows, commit) for device, rows in cells.items()},
    }
    kept = ""
    if earlier is not None:
        record, kept = merged(earlier, record, list(STRATEGIES))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    failing = [
        (d, s, c, v)
        for d, rows in cells.items()
        for s, row in rows.items()
        for c, v in row.items()
        if v.startswith("fails")
    ]
    print(
        f"capabilities: {len(chosen)} {'strategy' if len(chosen) == 1 else 'strategies'} x {len(CAPABILITIES)} "
        "capabilities in "
        f"{time.monotonic() - started:.0f} s, written to {path}{kept}"
    )
    for device, strategy, capability, verdict in failing:
        print(f"  {strategy} on {device}, {capability}: {verdict}")
    return 1 if failing or PLUGIN_PROBLEMS else 0


if __name__ == "__main__":
    raise SystemExit(main())
