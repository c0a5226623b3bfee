"""The findings shown: the Findings page's body (``templates/findings.html``) and the same as text for a terminal."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from markupsafe import Markup

from reports.findings.verdicts import TOPICS, Finding
from reports.templates import render
from reports.units import format_number, is_missing

INTRO = Markup(
    "Every verdict on this page is computed when the site is built, from the newest results of each machine and "
    "profile (and, for the claims about <code>Tensor.unfold</code> and <code>F.unfold</code>, from what the bench "
    "recorded by running torch): no number here is written by hand, so none can be contradicted by the next run. "
    "Each says which run it comes from: machine, commit, profile, timing regime and device. <b>Fastest</b> means "
    "the least paired ratio to native, measured inside each process (to <code>copy_</code> where native cannot "
    "run; in a run without paired ratios, the lowest median), among the strategies that return a new tensor "
    "(those that reuse their output buffer, "
    "{set_aside}, are shown separately where a target allows them). A target missed says by how much; a claim or "
    "target whose figures a run lacks is <b>not measured</b>, with the reason."
)


def _formatted(evidence: pd.DataFrame) -> pd.DataFrame:
    """The evidence as text: figures to 3 significant digits, a missing one as "-"."""

    def cell(value: object) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return "-" if is_missing(value) else format_number(value, 3)
        return "-" if value is None else str(value)

    return evidence.astype(object).map(cell) if not evidence.empty else evidence


CSS_OF_OUTCOME = {"holds": "box", "met": "box"}  # anything else: the warning box


def render_html(found: list[Finding], aside: Iterable[str] = ()) -> Markup:
    """The Findings page's body (``templates/findings.html``): an index of every verdict, then per topic each
    claim, its verdict, where it came from and its evidence table; ``aside``: the strategies set aside
    (``reports.set_aside``)."""
    names = Markup(", ").join(Markup("<code>{}</code>").format(name) for name in aside) or "none recorded"
    numbered = list(enumerate(found, 1))
    topics = []
    for topic in [*TOPICS, *sorted({f.topic for f in found} - set(TOPICS))]:
        mine = [
            (
                number,
                finding,
                CSS_OF_OUTCOME.get(finding.outcome, "box none"),
                Markup(_formatted(finding.evidence).to_html(index=False, border=0, escape=True))
                if not finding.evidence.empty
                else "",
            )
            for number, finding in numbered
            if finding.topic == topic
        ]
        if mine:
            topics.append((topic, mine))
    return render("findings.html", intro=INTRO.format(set_aside=names), numbered=numbered, topics=topics)


def format_text(found: list[Finding], tables: bool = False) -> str:
    """The findings as plain text for a terminal: per topic, each claim, its verdict, where it came from and
    the note (``tables``: the evidence tables too)."""
    lines = []
    for topic in [*TOPICS, *sorted({f.topic for f in found} - set(TOPICS))]:
        mine = [f for f in found if f.topic == topic]
        if not mine:
            continue
        lines.append(f"\n{topic}")
        for finding in mine:
            lines.append(f"- {finding.claim}\n    {finding.verdict}\n    from {finding.source}")
            if finding.note:
                lines.append(f"    {finding.note}")
            if tables and not finding.evidence.empty:
                text = _formatted(finding.evidence).to_string(index=False)
                lines.extend("      " + line for line in text.splitlines())
    return "\n".join(lines).lstrip("\n")
