"""The options the ``unfold-bench`` commands share, defined once (as asv's ``commands/common_args.py``).

Each ``add_*`` adds one option to a parser with the same name, choices, default and help in every command that
takes it: ``--profile``, ``--regime``, ``--device``, ``--bench`` (the cell regex ``make bench``'s ``BENCH``
passes), ``--machine`` and ``--commit`` (what a result is recorded under), ``--config`` (asv's configuration file),
``--mode`` (how the regression gate times) and ``--cells`` (the cells a check by hand times, ``parse_cells``).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.allocator import DEFAULT_REGIME, REGIMES
from benchmarks.profiles import DEFAULT_PROFILE, PROFILES
from benchmarks.trees import ROOT, git
from benchmarks.vocabulary import DEVICES

BENCH_HELP = (
    "a regex over the cells' asv names, e.g. \"unfold.Quick.time_forward('gather', 'allcnnc-conv2', 'cpu')\": "
    "conv2, 'gather', \"'gather', 'allcnnc-conv2'\""
)


def command_parser(name: str, description: str | None) -> argparse.ArgumentParser:
    """The parser of ``unfold-bench NAME``, its ``description`` (the command's docstring) shown as written.

    It takes no abbreviated option: argparse would read a prefix of a longer option as that option, so a mistyped
    or unknown ``--record`` set ``--record-in`` silently, and an option added later would change what a prefix in
    someone's script meant."""
    return argparse.ArgumentParser(
        prog=f"unfold-bench {name}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )


def add_profile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=DEFAULT_PROFILE,
        help=f"problem size: quick (batch at most 8) or full (the configs' own) (default {DEFAULT_PROFILE})",
    )


def add_regime(
    parser: argparse.ArgumentParser, default: str | None = DEFAULT_REGIME, also: tuple[str, ...] = ()
) -> None:
    """``--regime``: one of ``benchmarks.allocator.REGIMES``, or one of ``also`` (e.g. "both") where a command
    takes it; ``default`` None: the command tells a regime given from none (and times in the default one)."""
    parser.add_argument(
        "--regime",
        choices=[*REGIMES, *also],
        default=default,
        help=f"timing regime (default {default or DEFAULT_REGIME})",
    )


def add_device(
    parser: argparse.ArgumentParser, devices: tuple[str, ...] = DEVICES, why: str = "the device type to time on"
) -> None:
    """``--device``: one of ``devices`` (default every device type a cell runs on), the first by default."""
    parser.add_argument("--device", choices=devices, default=devices[0], help=f"{why} (default {devices[0]})")


def cell_regex(text: str) -> str:
    """argparse type of ``--bench``: a regular expression, refused before any work where it does not compile."""
    try:
        re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {error}") from None
    return text


def _refuse_broken_link(text: str, path: Path) -> None:
    """An argparse error where ``path`` (named by the option's value ``text``) is a symbolic link to nothing: a
    folder or file written through it would land where the link points, or the write would fail after the work."""
    if path.is_symlink() and not path.exists():
        raise argparse.ArgumentTypeError(
            f"{text!r}: {str(path)!r} is a link to {os.readlink(path)!r}, which does not exist"
        )


def _check_folder(text: str, folder: Path) -> None:
    """An argparse error where ``folder`` (which the option's value ``text`` names) could not be made and written
    into: a part of its path is a file, the nearest folder of it that exists cannot be written (``W_OK``) or entered
    (``X_OK``), or, where ``folder`` is missing, no folder can be made there (a folder made and removed at once
    shows it: ``os.access`` lets root through where ``mkdir`` fails, as in ``/proc``). Leaves nothing made: a
    command refused later leaves no empty folder behind."""
    existing = next(f for f in (folder, *folder.parents) if os.path.lexists(f))
    _refuse_broken_link(text, existing)
    if not os.path.isdir(existing):
        raise argparse.ArgumentTypeError(f"{text!r}: {str(existing)!r} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: {str(existing)!r} cannot be written into")
    if existing != folder:
        try:
            made = tempfile.mkdtemp(prefix=".unfold-bench-check-", dir=existing)
        except OSError as error:
            raise argparse.ArgumentTypeError(
                f"{text!r}: no folder can be made in {str(existing)!r} ({error.strerror})"
            ) from None
        with contextlib.suppress(OSError):  # made: the option stands, whether or not the probe can be removed
            os.rmdir(made)


def output_file(text: str) -> str:
    """argparse type of a file a command writes when its work is done: refused before the work where it names a
    folder or cannot be written (the work would be lost at the end), or its folder could not be made and written
    into (``_check_folder``). Checked, not made: the command makes its folder (``with_folder_made``) as it writes
    it, so a command refused later leaves no empty folder behind."""
    path = Path(text).absolute()
    _refuse_broken_link(text, path)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written")
    _check_folder(text, path.parent)
    return text


def with_folder_made(path: str) -> Path:
    """``path``, a file an option names (checked by ``output_file`` when parsed), with its folder made where it does
    not exist yet: called just before the command writes the file."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    return file


def output_folder(text: str) -> str:
    """argparse type of a folder a command writes into when its work is done: refused before the work where it or a
    part of its path is a file, or it could not be made or written into (``_check_folder``). Checked, not made: the
    command makes it (``mkdir(parents=True, exist_ok=True)``) when it writes into it."""
    path = Path(text).absolute()
    _refuse_broken_link(text, path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    _check_folder(text, path)
    return text


def config_file(text: str) -> str:
    """argparse type of ``--config``: asv's configuration file, refused before any work where it is missing, cannot
    be read or is not asv's configuration (asv would stop on it only once the command reaches it)."""
    from asv.config import Config
    from asv.util import UserError

    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: no such file")
    try:
        Config.load(text)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text!r} cannot be read ({error.strerror})") from None
    except (UserError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not asv's configuration: {error}") from None
    return text


def add_bench(parser: argparse.ArgumentParser, default: str = "", help: str = BENCH_HELP) -> None:
    parser.add_argument(
        "--bench", type=cell_regex, default=default, help=help + (f" (default {default!r})" if default else "")
    )


GATE_MODES = ("paired", "asv")  # the gate's: both revisions interleaved in each process, or asv's own runs


def add_mode(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        choices=GATE_MODES,
        default=GATE_MODES[0],
        help=f"how the gate times: paired (both revisions in each process) or asv (a run of each) "
        f"(default {GATE_MODES[0]})",
    )


MACHINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # one folder of results/, as asv names it
COMMIT_HASH = re.compile(r"[0-9a-fA-F]{7,40}")
FULL_COMMIT_HASH = re.compile(r"[0-9a-fA-F]{40}")


def finite_float(text: str) -> float:
    """argparse type of every number option: a float, refused before any work where it is not finite (``nan`` would
    pass every later check, since no comparison with it is true)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def machine_argument(text: str) -> str:
    """argparse type of ``--machine``: a name that is one folder of ``results/`` (letters, digits, ``._+-``), refused
    before any work where it is not (``../x`` would write outside the results)."""
    if not MACHINE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a machine name: letters, digits and . _ + - only, starting with a letter or digit"
        )
    return text


def commit_argument(text: str) -> str:
    """argparse type of ``--commit``: the full hash of a commit to record a result under. Where git finds this
    checkout's repository, ``text`` must name a commit of it and its full hash is returned (so that one commit is
    never recorded under two names); where it finds none (a GPU loan's tree) it must be 40 hexadecimal digits. A
    branch name or a typo is refused before any work rather than written into the results."""

    def succeeds(*arguments: str) -> str | None:  # git's output, or None where git fails or is not here
        try:
            return git(*arguments)
        except (OSError, subprocess.CalledProcessError):
            return None

    found = succeeds("rev-parse", "--verify", "--quiet", f"{text}^{{commit}}")
    if found and COMMIT_HASH.fullmatch(text):
        return found
    if succeeds("rev-parse", "--git-dir") is not None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a commit hash of this repository")
    if not FULL_COMMIT_HASH.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a full commit hash (40 hexadecimal digits)")
    return text.lower()


def add_machine(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--machine",
        type=machine_argument,
        help="machine name to record (default: derived from host, CPU, GPU and set-up, as make bench names it)",
    )


def add_commit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--commit",
        type=commit_argument,
        help="the commit hash to record under (default: git's HEAD; for a tree without .git, as on a GPU loan)",
    )


def add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=config_file, default=str(ROOT / "asv.conf.json"), help="asv configuration file (%(default)s)"
    )


DEFAULT_CELLS = (
    "native:allcnnc-conv2:forward",
    "as_strided:allcnnc-conv2:forward",
    "gather:allcnnc-conv2:forward",
    "compiled:allcnnc-conv2:forward",
    "native:allcnnc-conv3:forward_backward",
    "compiled:allcnnc-conv3:forward_backward",
)
EVERY_STRATEGY_CONFIGS = ("allcnnc-conv2", "allcnnc-conv3")  # --cells every: each strategy on these, both calls


def strategy_refusal() -> str | None:
    """Why a command that measures refuses the strategies named with ``--strategy`` (``$UNFOLD_BENCH_STRATEGIES``)
    from which the registry keeps none, one line each (``impls.PLUGIN_UNKEPT``), or None where it keeps each: it
    refuses them before any work, since a run without the strategy its user named answers another question."""
    from impls import PLUGIN_UNKEPT

    lines = [f"--strategy {spec!r}: {why}" for spec, why in PLUGIN_UNKEPT.items()]
    return "\n".join(lines) if lines else None


def refuse_unkept_strategies(parser: argparse.ArgumentParser) -> None:
    """Stop a command that measures with its usage error (exit status 2) where ``strategy_refusal`` refuses."""
    refused = strategy_refusal()
    if refused:
        parser.error(refused)


def warn_if_busy() -> None:
    """Say on stderr where other work keeps the CPUs busy just before this command measures (``benchmarks.busy``)."""
    from benchmarks.busy import busy_warning, other_load

    warning = busy_warning(other_load())
    if warning:
        print(warning, file=sys.stderr, flush=True)


def print_report(text: str, out: str | None) -> None:
    """Print a command's report and, with ``--out``, write it to that file too (its folder made if missing)."""
    print(text)
    if out:
        with_folder_made(out).write_text(text + "\n")
        print(f"written to {out}")


def add_cells(parser: argparse.ArgumentParser, default: tuple[str, ...] = DEFAULT_CELLS) -> None:
    """``--cells``, read by ``parse_cells``; ``default``: the cells a command times when none are given."""
    parser.add_argument(
        "--cells",
        default=",".join(default),
        help=f"STRATEGY:CONFIG:CALL,... (CPU), or 'every': each strategy on {', '.join(EVERY_STRATEGY_CONFIGS)} "
        "(default: %(default)s)",
    )


def parse_cells(text: str, profile_name: str, parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    """``--cells`` as (strategy, config, call) triples that run on this machine's CPU; a usage error of ``parser``
    (exit 2) naming the cell that is malformed, unknown or does not run here."""
    from benchmarks.cells import Cell
    from benchmarks.vocabulary import PASSES, split_cell

    profile = PROFILES[profile_name]
    if text == "every":
        from impls import STRATEGIES

        return [
            (name, config, call)
            for config in EVERY_STRATEGY_CONFIGS
            for name in STRATEGIES
            for call in PASSES
            if Cell.from_names(name, config, "cpu", profile).skip_reason() is None
        ]
    cells = []
    for item in text.split(","):
        try:
            parts = split_cell(item.strip())
        except ValueError as error:
            parser.error(f"--cells: {error}")
        try:
            reason = Cell.from_names(parts[0], parts[1], "cpu", profile).skip_reason()
        except KeyError as error:
            parser.error(f"--cells: {item!r}: {error.args[0]}")
        if reason is not None:
            parser.error(f"--cells: {item!r} does not run here: {reason}")
        cells.append(parts)
    return cells


class OptionGroup(list):
    """The actions of the options added through it (argparse keeps a group's own only in a private field), so that
    ``parse_telling_given`` can tell which of them a command line gave."""

    def __init__(self, add_argument: Callable[..., argparse.Action]) -> None:
        super().__init__()
        self._add_argument = add_argument

    def add_argument(self, *names: str, **options: Any) -> argparse.Action:
        """As argparse's, for options whose default ``parse_telling_given`` can fill in as argparse would: not one
        that accumulates (append, extend, count), nor a string default that ``type`` would convert."""
        if options.get("action") in ("append", "append_const", "extend", "count"):
            raise ValueError(f"{names[0]}: an option that accumulates cannot be told given from its default")
        if isinstance(options.get("default"), str) and options.get("type") is not None:
            raise ValueError(f"{names[0]}: a string default that type converts: give the default converted")
        action = self._add_argument(*names, **options)
        self.append(action)
        return action


def parse_telling_given(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, *groups: OptionGroup
) -> tuple[argparse.Namespace, list[list[str]]]:
    """``parser.parse_args(argv)``, and for each of ``groups`` the options of it that ``argv`` gave (by their first
    name), told from their defaults by starting them unset: a command refuses those that its other mode reads."""
    unset = object()
    args = parser.parse_args(argv, argparse.Namespace(**{a.dest: unset for group in groups for a in group}))
    given = [[a.option_strings[0] for a in group if getattr(args, a.dest) is not unset] for group in groups]
    for action in (a for group in groups for a in group):
        if getattr(args, action.dest) is unset:
            setattr(args, action.dest, action.default)
    return args, given
