"""The Findings page: every claim and target the project states, with its verdict computed from the results.

Nothing here is written down by hand: ``findings(table, catalogue)`` judges, on the newest run of each machine and
profile (``reports.analysis.latest_runs``) and each device that has figures, the source documents' claims
(``sources``), the roofline and new-tensor targets on the All-CNN-C layers of full-profile runs (``targets``) and
the physics checks (``physics``). Each ``Finding`` (``verdicts``) carries its claim, its verdict, the evidence as a
DataFrame and where it came from; missing data gives "not measured" with the reason, never an error.
``render_html`` writes the page's body, ``format_text`` the same for a terminal (``render``).
"""

from __future__ import annotations

import pandas as pd

from reports.findings.physics import physics_findings
from reports.findings.render import format_text, render_html
from reports.findings.sources import onehot_findings, tensor_unfold_findings
from reports.findings.targets import new_tensor_findings, roofline_findings
from reports.findings.verdicts import NEW_TENSOR, PHYSICS, ROOFLINE, SOURCES, TOPICS, Finding, newest_runs
from reports.results import Catalogue
from reports.set_aside import set_aside

__all__ = [
    "NEW_TENSOR",
    "PHYSICS",
    "ROOFLINE",
    "SOURCES",
    "TOPICS",
    "Finding",
    "findings",
    "format_text",
    "render_html",
]


def findings(table: pd.DataFrame, catalogue: Catalogue) -> list[Finding]:
    """Every finding, from ``load_results``' tidy table (the newest run of each machine and profile) and what the
    bench recorded (``load_catalogue``)."""
    runs = newest_runs(table)
    return [
        *tensor_unfold_findings(catalogue),
        *onehot_findings(runs),
        *roofline_findings(runs, set_aside(catalogue.strategies)),
        *new_tensor_findings(runs, catalogue),
        *physics_findings(runs),
    ]
