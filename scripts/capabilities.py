"""Measure the capability matrix on this machine and write it for the site: part of `make bench`.

Every registered strategy, every capability of ``impls.capabilities`` (autograd to second order, forward-mode AD,
vmap, per-sample gradients, ``torch.compile``, an empty batch, layouts, dtypes) on every device: ``works``,
``declared defect: ...``, ``unsupported: ...`` or ``unverified: ...`` (a device this machine does not have).
Written to ``reports/capabilities/<machine>.json`` with the commit, torch version and date; the site shows the
newest file of each machine on its which-to-ship page. The test suite checks the same cells
(``tests/test_capabilities.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from benchmarks.trees import ROOT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "reports" / "capabilities"), help="directory to write into")
    parser.add_argument("--devices", default="cpu,cuda", help="comma-separated devices to check (default cpu,cuda)")
    parser.add_argument("--commit", help="the commit to record (default: git's HEAD; for a tree without .git)")
    args = parser.parse_args()

    import torch

    from benchmarks.machine import machine_name
    from impls import PLUGIN_PROBLEMS, STRATEGIES
    from impls.capabilities import CAPABILITIES, matrix
    from impls.plugins import describe

    for line in describe(STRATEGIES, PLUGIN_PROBLEMS):
        print(line, flush=True)

    started = time.monotonic()
    commit = (
        args.commit
        or subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    )
    machine = machine_name()
    try:
        cells = matrix(STRATEGIES, tuple(args.devices.split(",")))
    except ValueError as error:
        parser.error(f"--devices {args.devices!r}: {error}")
    record = {
        "machine": machine,
        "commit": commit,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "capabilities": list(CAPABILITIES),
        "cells": cells,
    }
    path = Path(args.out) / f"{machine}.json"
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
        f"capabilities: {len(STRATEGIES)} strategies x {len(CAPABILITIES)} capabilities in "
        f"{time.monotonic() - started:.0f} s, written to {path}"
    )
    for device, strategy, capability, verdict in failing:
        print(f"  {strategy} on {device}, {capability}: {verdict}")
    return 1 if failing or PLUGIN_PROBLEMS else 0


if __name__ == "__main__":
    raise SystemExit(main())
