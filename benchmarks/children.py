"""One way to run a measuring child process: a JSON spec on its standard input, JSON rows on its standard output.

A child that measures prints one JSON object per line as each measurement is made, and may print progress lines
between them; the parent keeps every row printed before the child ended, so a crash or a timeout loses only
what was still in flight, and says why the child ended. The gate's replicate and net-peak processes, ``advise``'s
per-layer processes, the instruction counts and the agreement check all run their children through here.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmarks.trees import ROOT


def run_json_child(
    command: Sequence[str],
    spec: object | None,
    env: Mapping[str, str] | None,
    timeout: float,
    progress: Callable[[str], None] | None = None,
    cwd: str | Path = ROOT,
) -> tuple[list[dict], str]:
    """Run ``command`` in ``cwd`` with ``spec`` as JSON on its standard input (None: no input); the rows it printed
    (lines starting with ``{``), each other non-empty line passed to ``progress`` as it comes, and why it ended if
    it failed (else "")."""
    rows: list[dict] = []
    try:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.PIPE if spec is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as error:
        return rows, f"could not start: {error}"
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        process.kill()

    timer = threading.Timer(timeout, kill)
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()))
    timer.start()
    reader.start()
    try:
        if spec is not None:
            try:
                process.stdin.write(json.dumps(spec))
                process.stdin.close()
            except BrokenPipeError:  # the child ended before reading it: its exit status says why
                pass
        for line in process.stdout:
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:  # a row cut short by a kill
                    pass
            elif line.strip() and progress is not None:
                progress(line.rstrip())
        process.wait()
    finally:
        timer.cancel()
        reader.join()
    if killed.is_set():
        return rows, f"took longer than {timeout:.0f} s and was killed"
    if process.returncode != 0:
        return rows, f"exited with status {process.returncode}: {''.join(errors).strip()[-1500:]}"
    return rows, ""
