"""The record files kept beside a machine's results: one JSON object per line, named ``*.jsonl``.

asv reads only ``*.json`` in ``results/<machine>/``, so what the suite records there besides asv's results (the
catalogue, the gate's design, the run levels, each results file's selections and lost replicates) is JSON lines.
A record about one results file (``<commit>-<environment>.json``) goes in a file of its own beside it,
``<results file stem><suffix>``, so that laying one run's results over another's (the publishing job, ``gpu-check
import``) never replaces another commit's records. Appending adds lines; rewriting a file replaces it whole, so a
kill leaves the old records or the new ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path


def beside_results(directory: Path, results_file: str, suffix: str) -> Path:
    """The record file ``suffix`` (``.<name>.jsonl``) of ``directory/results_file``, asv's results file of a commit
    and environment."""
    return Path(directory) / (Path(results_file).stem + suffix)


def read_records(path: Path) -> list[dict]:
    """The records of ``path``, in order (none where it is absent)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def append_records(path: Path, records: Iterable[dict]) -> None:
    """Add ``records`` at the end of ``path`` (made, with its folder, where absent; untouched where there are none)."""
    text = "".join(json.dumps(record) + "\n" for record in records)
    if text:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(text)


def write_records(path: Path, records: Iterable[dict]) -> Path:
    """Replace ``path``'s records with ``records`` at once (a kill leaves the old ones or the new); its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text("".join(json.dumps(record) + "\n" for record in records))
    partial.replace(path)
    return path
