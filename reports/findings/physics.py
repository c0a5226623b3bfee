"""Findings of the physics checks: no figure beyond the bounds measured in the same run
(``reports.summary.physics_problems``)."""

from __future__ import annotations

import pandas as pd

from reports.findings.verdicts import PHYSICS, Finding, Run, not_measured
from reports.summary import UNPAIRED_FLOOR, physics_problems

PHYSICS_CLAIM = (
    "Every figure respects the bounds measured in the same run: no forward faster than the write-only fill_ floor "
    "(beyond the run's noise), no net peak below the analytic minimum"
)
# How to read a forward below the fill_ floor (the check stays strict: it is the one that catches a wrong timer)
PHYSICS_FLOOR_NOTE = (
    "Where a run has no paired floors (benchmarks.floors), a forward and its fill_ floor are timed in different "
    "processes. On a shared VM the same resident write "
    "can run at different speeds in two processes (the memory a process is given differs), which the run's "
    "quartiles, taken within processes, do not show. A lone forward below the floor is therefore first a sign "
    "that its processes ran faster than the floor's; many of them, or one far below, point at the measurement."
)


def physics_findings(runs: list[Run]) -> list[Finding]:
    """``reports.summary.physics_problems`` per run and device; a run without bounds is not measured."""
    if not runs:
        return [not_measured(PHYSICS, PHYSICS_CLAIM, "no results", "the newest run of each machine and profile")]
    out = []
    for run in runs:
        bounds = run.rows[(run.rows.suite == "bounds") & (run.rows.status == "ok")]
        if bounds.empty:
            out.append(not_measured(PHYSICS, PHYSICS_CLAIM, "the run has no bounds", run=run))
            continue
        problems = physics_problems(run.rows)
        count = f"{len(problems)} figure contradicts" if len(problems) == 1 else f"{len(problems)} figures contradict"
        verdict = f"does not hold: {count} the bounds" if problems else "holds"
        out.append(
            Finding(
                PHYSICS,
                PHYSICS_CLAIM,
                verdict,
                pd.DataFrame({"problem": problems}, dtype=object),
                run.source,
                note=PHYSICS_FLOOR_NOTE if any(UNPAIRED_FLOOR in problem for problem in problems) else "",
                run=run.run,
            )
        )
    return out
