"""Which cells a finished run was asked for, the whole profile or a selection, recorded beside its results.

asv records every cell of a benchmark it ran, n/a alike where a run of a selection (``--bench``) left it out and
where the machine cannot run it, so its results cannot tell a whole run from a selection. ``unfold-bench bench``
therefore writes, once every chunk of a run has finished, one record to ``results/<machine>/selections.jsonl``
(asv reads only ``*.json`` there): the results file it saved in, the profile and the ``--bench`` regex ("" for
every cell). A killed run writes none until a resume finishes it. The reports take a results file that a finished
run measured whole as a whole run (``reports.analysis.latest_runs``), whatever another run of another registry
measured; one without a record (older results, a killed run) is judged by its cell count.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

SELECTIONS_FILE = "selections.jsonl"
WHOLE = ""  # the --bench of a run of every cell


def record_selection(machine_dir: Path, results_file: str, profile: str, bench: str) -> None:
    """Record that a run of ``profile`` selected by ``bench`` (``WHOLE``: every cell) finished into
    ``machine_dir/results_file`` (asv's name of the commit's and environment's results file)."""
    machine_dir.mkdir(parents=True, exist_ok=True)
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record = {"file": results_file, "profile": profile, "bench": bench, "finished": date}
    with (machine_dir / SELECTIONS_FILE).open("a") as out:
        out.write(json.dumps(record) + "\n")


def selections(records: list[dict]) -> dict[tuple[str, str], str]:
    """(results file, profile) -> ``WHOLE`` where a finished run measured every cell into it, else the newest
    selection's regex."""
    found: dict[tuple[str, str], str] = {}
    for record in records:
        key = (record["file"], record["profile"])
        if found.get(key) != WHOLE:
            found[key] = record["bench"]
    return found
