"""Which cells a finished run was asked for, the whole profile or a selection, recorded beside its results.

asv records every cell of a benchmark it ran, n/a alike where a run of a selection (``--bench``) left it out and
where the machine cannot run it, so its results cannot tell a whole run from a selection. ``unfold-bench bench``
therefore appends, once every chunk of a run has finished, one record to ``<results file stem>.selections.jsonl``
beside the results file it saved in (asv reads only ``*.json`` there): the profile and the ``--bench`` regex (""
for every cell). One file per results file, so that laying one run's results over another's (the publishing job,
``gpu-check import``) never replaces another commit's record. A run that stopped early (asv failed, or it was
killed) writes none until a resume finishes it, and ``bench --commits`` (asv's own environments, commit by
commit) writes none. The reports take a results file that a finished run measured whole as a whole run
(``reports.analysis.latest_runs``), whatever another run of another registry measured; one without a record is
judged by its cell count.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Iterable
from pathlib import Path

from benchmarks.records import append_records, beside_results, read_records

SELECTIONS_SUFFIX = ".selections.jsonl"
WHOLE = ""  # the --bench of a run of every cell


def selections_path(machine_dir: Path, results_file: str) -> Path:
    """Where the selections of ``machine_dir/results_file`` (asv's results file of a commit and environment) go."""
    return beside_results(machine_dir, results_file, SELECTIONS_SUFFIX)


def record_selection(machine_dir: Path, results_file: str, profile: str, bench: str) -> None:
    """Record that a run of ``profile`` selected by ``bench`` (``WHOLE``: every cell) finished into
    ``machine_dir/results_file``."""
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    append_records(selections_path(machine_dir, results_file), [{"profile": profile, "bench": bench, "finished": date}])


def record_if_finished(
    machine_dir: Path,
    results_file: str,
    profile: str,
    bench: str,
    planned: Iterable[str],
    finished: Collection[str],
    status: int,
) -> bool:
    """``record_selection`` where the run finished: asv's status 0 or 2 (a failed cell is a result like any other)
    and every ``planned`` chunk among the ``finished`` ones (``benchmarks.runner.Ledger``); whether it recorded.
    A run that stopped early (asv itself failed, or was killed) records nothing, so its cell count judges it."""
    if status not in (0, 2) or not set(planned) <= set(finished):
        return False
    record_selection(machine_dir, results_file, profile, bench)
    return True


def selections(machine_dir: Path) -> dict[tuple[str, str], str]:
    """(results file, profile) -> ``WHOLE`` where a finished run measured every cell into it, else the newest
    selection's regex, for every results file of ``machine_dir`` with a record."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted(Path(machine_dir).glob(f"*{SELECTIONS_SUFFIX}")):
        results_file = path.name.removesuffix(SELECTIONS_SUFFIX) + ".json"
        for record in read_records(path):
            key = (results_file, record["profile"])
            if found.get(key) != WHOLE:
                found[key] = record["bench"]
    return found
