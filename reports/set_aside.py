"""Strategies the reports show everywhere but never recommend or call the fastest, and why.

A library cannot ship an unfold that overwrites its previous result, so a strategy that reuses its output
buffer (the registry's ``Strategy.reuses_output``, e.g. ``gather_reuse``) is measured, charted and scored,
but the website's recommendations and the summary's "fastest per config" pass it over. Its figures stay
beside the fresh-output strategies, so a reader sees what reuse buys. One mapping, read by
``reports.site`` and ``reports.summary``, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from impls import STRATEGIES

SET_ASIDE: Mapping[str, str] = MappingProxyType(
    {
        s.name: "reuses its output buffer: a call overwrites the previous result"
        for s in STRATEGIES.values()
        if s.reuses_output
    }
)

# Each strategy's machinery count (``Strategy.machinery``): the second tie-break of a pick (``analysis.TIE_TEXT``).
COMPLEXITY: Mapping[str, int] = MappingProxyType({s.name: len(s.machinery) for s in STRATEGIES.values()})
