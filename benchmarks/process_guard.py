"""Run a command so that its caller's death, a SIGKILL included, leaves none of the command's processes behind.

The command runs in a session of its own (``setsid``), so asv and every process it starts (its forkserver,
the benchmark processes forked from it) share one session id. A guardian process, a child of the caller,
reads its standard input until it closes, which happens when the caller exits for any reason, and then
kills every process still in that session. The guardian ignores the terminal's interrupt, so a Ctrl-C that
ends the caller still cleans up. Linux only: the session of a process is read from ``/proc/PID/stat``.

Run as a script, this file is the guardian: ``python process_guard.py`` reads the session id from its first
input line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after "pid (comm)": state, parent, process group, session, ...; None
    when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def session_members(session: int) -> list[int]:
    """The live processes in ``session`` (other than the caller; a zombie is dead already)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None and int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def kill_session(session: int, passes: int = 100) -> None:
    """SIGKILL every process in ``session``, pass after pass until none is left (at most ``passes``).

    One pass is not enough: a pass lists the session and then kills what it listed, and a member not yet killed
    (asv's forkserver, say) can fork in between.
    """
    for _ in range(passes):
        members = session_members(session)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def run_guarded(command: list[str], env: Mapping[str, str], cwd: str | Path, output: IO[bytes]) -> int:
    """Run ``command`` to completion, its output (stdout and stderr) to ``output``; return its exit status.

    Whatever way this process ends, no process of the command's session outlives both of them.
    """
    guardian = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve())], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        process = subprocess.Popen(
            command, cwd=cwd, env=dict(env), stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        guardian.stdin.write(f"{process.pid}\n".encode())
        guardian.stdin.flush()
        try:
            return process.wait()
        except BaseException:
            kill_session(process.pid)
            raise
    finally:
        guardian.stdin.close()  # the guardian now kills what is left in the session, and exits
        guardian.wait()


def _guard() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    line = sys.stdin.readline()
    if not line.strip():
        return
    session = int(line)
    sys.stdin.read()  # returns when the caller closes its end: done, or dead
    kill_session(session)


if __name__ == "__main__":
    _guard()
