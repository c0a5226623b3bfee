"""One way to run a measuring child process: a JSON spec on its standard input, JSON rows on its standard output.

A child that measures prints one JSON object per line as each measurement is made; the parent keeps every row
printed before the child ended, so a crash or a timeout loses only what was still in flight, and says why the
child ended.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_json_child(
    command: Sequence[str], spec: object | None, env: Mapping[str, str] | None, timeout: float
) -> tuple[list[dict], str]:
    """Run ``command`` in the repository with ``spec`` as JSON on its standard input (None: no input); the rows it
    printed (lines starting with ``{``), and why it ended if it failed (else "")."""
    stdin = None if spec is None else json.dumps(spec)
    try:
        done = subprocess.run(
            list(command),
            cwd=ROOT,
            env=None if env is None else dict(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        why = "" if done.returncode == 0 else f"exited with status {done.returncode}: {done.stderr.strip()[-1500:]}"
        stdout = done.stdout
    except subprocess.TimeoutExpired as expired:
        why = f"took longer than {timeout:.0f} s and was killed"
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")], why
