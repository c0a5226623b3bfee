"""Strategies the reports show everywhere but never recommend or call the fastest, and why; and each one's
machinery count, the second tie-break of a pick.

A library cannot ship an unfold that overwrites its previous result, so a strategy that reuses its output
buffer (the registry's ``Strategy.reuses_output``, e.g. ``gather_reuse``) is measured, charted and scored,
but the website's recommendations and the summary's "fastest per config" pass it over. Its figures stay
beside the fresh-output strategies, so a reader sees what reuse buys. Both read the strategies' records
(``benchmarks.catalogue``: the bench writes them, ``reports.results.load_catalogue`` reads them), so the site
and the summary cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

REUSES_OUTPUT = "reuses its output buffer: a call overwrites the previous result"


def set_aside(strategies: Mapping[str, Mapping]) -> dict[str, str]:
    """Each strategy never recommended, and why, from the strategies' records."""
    return {name: REUSES_OUTPUT for name, record in strategies.items() if record.get("reuses_output")}


def complexity(strategies: Mapping[str, Mapping]) -> dict[str, int]:
    """Each strategy's machinery count (``Strategy.machinery``): the second tie-break of a pick
    (``reports.analysis.TIE_TEXT``)."""
    return {name: len(record.get("machinery", ())) for name, record in strategies.items()}
