"""Bad input to a command is refused before any work, naming the option and its value (the house rule)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.trees import ROOT
from unfold_bench.cli import main


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["stability", "--bench", "zzz"], "--bench 'zzz': no quick-profile cell matches"),
        (["stability", "--record"], "--record: a measurement records its run level anyway"),
        (["stability", "--bench", "^ratios"], "--bench '^ratios': selects paired ratios alone; the report reads them"),
        (["capabilities", "--out", "/etc/hostname"], "--out: '/etc/hostname' is a file, not a folder"),
        (["report", "--out", "/etc/hostname/site"], "--out: '/etc/hostname/site': '/etc/hostname' is not a folder"),
        (["report", "--config", "/no/such/asv.conf.json"], "--config: '/no/such/asv.conf.json': no such file"),
        (["bench", "--config", "/no/such/asv.conf.json"], "--config: '/no/such/asv.conf.json': no such file"),
        (["validate-gate", "--aa", "-1"], "--aa -1: a number of runs"),
        (["validate-gate", "--aa", "0", "--injected", "0"], "nothing to run"),
        (["validate-gate", "--margin", "0.1"], "give --rejudge DIR"),
        (["validate-gate", "--rejudge", ".", "--margin", "-0.1"], "--margin -0.1: must be at least 0"),
        (["variance", "--round-seconds", "0"], "--round-seconds 0: must be above 0 seconds"),
        (["variance", "--against", "nosuch"], "--against 'nosuch'"),
        (["variance", "--target", "0.5"], "--target 0.5"),
        (["variance", "--from-json", "/no/such/rounds.jsonl"], "--from-json /no/such/rounds.jsonl: no such file"),
        (["agreement", "--out", "/etc/hostname/table.txt"], "--out: '/etc/hostname/table.txt': '/etc/hostname' is not"),
        (["advise", "--input-shape", "2,3,8,8", "--kernel-size", "3", "--json", "/etc/hostname/x"], "not a folder"),
        (["regress", "HEAD", "--verdict-file", "/proc/no-such/v.json"], "--verdict-file: '/proc/no-such/v.json'"),
        (
            ["regress", "HEAD", "--repo", "/no/such/repo", "--strategy", "a.b:c"],
            "--repo '/no/such/repo': no such folder",
        ),
        (["regress", "HEAD", "--repo", "/no/such/repo"], "--repo '/no/such/repo': no such folder"),
        (["advise", "--input-shape", "0,3,8,8", "--kernel-size", "3"], "--input-shape 0,3,8,8: a batch of 0 has no"),
        (["bench", "--summaries", "/etc/hostname"], "--summaries: '/etc/hostname' is a file, not a folder"),
        (["stability", "--keep", "/etc/hostname"], "--keep: '/etc/hostname' is a file, not a folder"),
        (["cost", "--workdir", "/etc/hostname"], "--workdir: '/etc/hostname' is a file, not a folder"),
        (["cost", "--profile", "nosuch"], "--profile: invalid choice: 'nosuch'"),
        (
            ["advise", "--input-shape", "2,3,8,8", "--kernel-size", "3", "--budget", "nan"],
            "--budget: 'nan' is not a finite number",
        ),
        (["commits"], "unknown command 'commits'"),
        (["--strategy", "nocolon", "regress", "HEAD"], "--strategy 'nocolon': expected MODULE:ATTRIBUTE"),
        (["--strategy"], "--strategy needs MODULE:ATTRIBUTE"),
        (["bench", "--machine", "../elsewhere"], "--machine: '../elsewhere' is not a machine name"),
        (["regress", "HEAD", "--machine", "a/b"], "--machine: 'a/b' is not a machine name"),
        (["regress", "HEAD", "--rounds", "8"], "--rounds: an option of --mode asv, which this run (--mode paired)"),
        (["regress", "HEAD", "--mode", "asv", "--margin=0.1"], "--margin: an option of --mode paired, which this"),
        (["regress", "HEAD", "--mode", "asv", "--regime", "warm"], "--regime: an option of --mode paired, which this"),
        (["variance", "--machine", ".."], "--machine: '..' is not a machine name"),
        (["bench", "--commit", "notacommit"], "--commit: 'notacommit' is not a commit hash"),
        (["capabilities", "--commit", "main"], "--commit: 'main' is not a commit hash"),  # a branch moves
        (["bench", "--commit", "0" * 40], "--commit: '0000000000000000000000000000000000000000' is not a commit"),
        # a prefix of a longer option is no option (argparse would take it for that option); each value here is one
        # the longer option refuses at once, so that a parser which took the prefix fails this test without working
        (["stability", "--ben", "zzz"], "unrecognized arguments: --ben zzz"),
        (["bench", "--prof", "nosuch"], "unrecognized arguments: --prof nosuch"),
        (["gpu-check", "run", "--budg", "0"], "unrecognized arguments: --budg 0"),
        (["regress", "HEAD", "--verdict", "/proc/no-such/v.json"], "unrecognized arguments: --verdict"),
        (["stability", "--record-in", "/no/such/results"], "--record-in /no/such/results: no such folder"),
        (["variance", "--from-json", "/no/such.jsonl", "--runs", "3"], "--runs: only for a measurement; --from-json"),
        (["variance", "--from-gate-runs", "/no/such", "--cells", "every"], "--cells: only for a measurement"),
        (["regress", "HEAD", "--mode", "asv", "--rounds", "0"], "--rounds 0: a number of rounds a side, at least"),
        (["summary", "--machine", "nosuch"], "--machine nosuch: no results of it in"),
        (["summary", "--machine", "vm-amd-epyc-2cpu-nogpu", "--commit", "zzz"], "--commit zzz: no run of vm-amd"),
        (["validate-gate", "--bench", "nosuch"], "--bench 'nosuch': selects no cell of gather, cpp, compiled"),
        (["validate-gate", "--workdir", "/etc/passwd"], "--workdir /etc/passwd: not a folder"),
        (["validate-gate", "--rejudge", "docs/gate-validation-gather-runs", "--aa", "3"], "--aa: for a validation"),
    ],
)
def test_a_command_refuses_bad_input_naming_it_before_any_work(arguments, named, capsys):
    from unfold_bench.commands.bench import NOTHING_RUN

    assert main(arguments) == (NOTHING_RUN if arguments[0] == "bench" else 2)  # make bench stops on bench's own
    assert named in capsys.readouterr().err


def test_a_command_that_cannot_be_loaded_exits_2_never_regress_regression_status(monkeypatch, capsys):
    """A broken install is not a regression: ``regress`` gives 1 to a regression alone."""
    monkeypatch.setitem(sys.modules, "unfold_bench.commands.regress", None)  # its import raises
    assert main(["regress", "HEAD"]) == 2
    assert "the command 'regress' could not be loaded" in capsys.readouterr().err


@pytest.mark.parametrize("writer", ["stability", "print_report"])
def test_an_output_files_missing_folder_is_made_when_the_command_writes_it(tmp_path, monkeypatch, capsys, writer):
    """A file two levels below any folder that exists: accepted when parsed and nothing made, then written with its
    folder by ``stability --from-runs --out`` (its runs' analysis replaced) or by ``print_report``, the writer of
    agreement's, context's and variance's ``--out``."""
    from unfold_bench.common_args import output_file, print_report

    wanted = tmp_path / "reports" / "gate" / f"{writer}.txt"
    assert output_file(str(wanted)) == str(wanted) and not (tmp_path / "reports").exists()
    if writer == "stability":
        from tests.test_stability import _kept_runs
        from unfold_bench.commands import stability

        assert stability.main([*_kept_runs(tmp_path, monkeypatch), "--out", str(wanted)]) == 0
        assert wanted.read_text().startswith("the report\n")
    else:
        print_report("the table", str(wanted))
        assert wanted.read_text() == "the table\n"


def test_a_commit_is_recorded_under_its_full_hash():
    from benchmarks.trees import git
    from unfold_bench.common_args import commit_argument

    head = git("rev-parse", "HEAD")
    assert commit_argument(head[:8]) == commit_argument(head.upper()) == head  # one commit, one name


def test_without_a_repository_a_commit_must_be_a_full_hash(tmp_path, monkeypatch):
    import argparse

    from unfold_bench.common_args import commit_argument

    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-git"))  # as in the tree a lent machine receives
    assert commit_argument("AB" * 20) == "ab" * 20
    with pytest.raises(argparse.ArgumentTypeError, match="not a full commit hash"):
        commit_argument("abc1234")


def test_every_commands_parser_refuses_an_abbreviated_option():
    """Every parser of the commands is built as ``common_args.command_parser`` builds one, with no abbreviated
    options: ``argparse.ArgumentParser`` itself only where it says ``allow_abbrev=False``."""
    import ast

    from unfold_bench.cli import COMMANDS_DIR

    for path in sorted(COMMANDS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in (
                "argparse.ArgumentParser",
                "commands.add_parser",
            ):
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                assert keywords.get("allow_abbrev") == "False", (path.name, node.lineno)


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        (["report", "--out", "{out}", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["capabilities", "--out", "{out}", "--commit", "main"], "--commit: 'main' is not a commit hash"),
        (["capabilities", "--out", "{out}", "--devices", "nosuch"], "--devices 'nosuch'"),  # refused in main
        # a file a command writes when its work is done (common_args.output_file), refused by argparse before it
        (["stability", "--out", "{out}/stability.txt", "--no-such-option"], "unrecognized arguments"),
        (
            "advise --input-shape 2,3,8,8 --kernel-size 3 --json {out}/a.json --html {out}/a.html --no-such".split(),
            "unrecognized arguments: --no-such",
        ),
        (
            ["variance", "--out", "{out}/variance.txt", "--json", "{out}/rounds.jsonl", "--no-such-option"],
            "unrecognized",
        ),
        (["validate-gate", "--out", "{out}/gate-validation.txt", "--no-such-option"], "unrecognized arguments"),
        (["agreement", "--out", "{out}/agreement.txt", "--no-such-option"], "unrecognized arguments"),
        (["context", "--out", "{out}/call-context.txt", "--no-such-option"], "unrecognized arguments"),
        (["cost", "--out", "{out}/cost.txt", "--no-such-option"], "unrecognized arguments"),
    ],
)
def test_a_command_refused_after_an_output_option_is_parsed_leaves_no_folder_behind(tmp_path, command, refused, capsys):
    out = tmp_path / "new" / "site"
    assert main([a.format(out=out) for a in command]) == 2
    assert refused in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_an_out_folder_is_checked_without_being_made_and_refused_naming_it(tmp_path, monkeypatch):
    """Where it is a file, where a part of its path is a file, where the nearest folder of it that exists cannot be
    written or entered; a nested folder that does not exist yet is accepted, and nothing is made."""
    import argparse

    from unfold_bench.common_args import output_folder

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    nested = tmp_path / "locked" / "reports" / "site"
    assert output_folder(str(nested)) == str(nested) and not (tmp_path / "locked").exists()
    for text, named in (
        (a_file, f"'{a_file}' is a file, not a folder"),
        (a_file / "site", f"'{a_file / 'site'}': '{a_file}' is not a folder"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(named)):
            output_folder(str(text))
    (tmp_path / "locked").mkdir()
    access = os.access
    for denied in (os.W_OK, os.X_OK):  # checked through os.access: the tests may run as root, whom no mode stops

        def refuses(path, mode, denied=denied):
            return not (Path(path) == tmp_path / "locked" and mode & denied) and access(path, mode)

        monkeypatch.setattr(os, "access", refuses)
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"'{nested}': '{tmp_path / 'locked'}' cannot")):
            output_folder(str(nested))
    assert not (tmp_path / "locked" / "reports").exists()


@pytest.mark.parametrize("option_type", ["output_folder", "output_file"])
def test_a_link_to_nothing_is_refused_as_such_where_named_or_on_the_way(tmp_path, option_type):
    """A dangling symbolic link, named itself or as a folder on the way: named as a link to nothing, not as a file
    (a file written through it would land where it points, or fail once the work is done)."""
    import argparse

    from unfold_bench import common_args

    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    for text in (link, link / "below" / "report.txt"):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"{str(link)!r} is a link to ")):
            getattr(common_args, option_type)(str(text))
    assert not (tmp_path / "gone").exists()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")
@pytest.mark.parametrize(
    ("option_type", "text"), [("output_folder", "/proc/no-such/site"), ("output_file", "/proc/v/f")]
)
def test_a_folder_that_cannot_be_made_is_refused_where_os_access_lets_it_through(option_type, text):
    """``/proc`` takes no new folder, though ``os.access`` lets root write into it: a folder is tried there, so
    that the command is refused now rather than after its work."""
    import argparse

    from unfold_bench import common_args

    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"{text!r}: ")):
        getattr(common_args, option_type)(text)


@pytest.mark.parametrize("command", ["capabilities", pytest.param("report", marks=pytest.mark.slow)])
def test_a_nested_out_folder_is_made_when_the_command_writes_into_it(tmp_path, monkeypatch, command):
    """``--out`` two levels below any folder that exists: not made when parsed, and made with what the command
    writes in it (the capability checks replaced: only the writing is tested here)."""
    from unfold_bench.common_args import output_folder

    out = tmp_path / "reports" / command
    assert output_folder(str(out)) == str(out) and not (tmp_path / "reports").exists()
    if command == "capabilities":
        cells = {"cpu": {"native": {"vmap": "works"}}}
        monkeypatch.setattr("impls.capabilities.matrix", lambda strategies, devices: cells)
        monkeypatch.setattr("benchmarks.machine.machine_name", lambda: "vm-a")
        assert main(["capabilities", "--out", str(out), "--devices", "cpu"]) == 0
        assert json.loads((out / "vm-a.json").read_text())["cells"] == cells
    else:
        results = Path(__file__).resolve().parent / "fixtures" / "report_results"
        assert main(["report", "--results", str(results), "--out", str(out), "--no-asv-publish"]) == 0
        assert (out / "index.html").is_file()


def test_validate_gate_rejudges_only_runs_of_the_injection_and_machine_it_is_told(monkeypatch, capsys):
    """Judged as another strategy's runs, or pooled across machines, saved tables give wrong figures."""
    monkeypatch.chdir(ROOT)
    wrong = ["validate-gate", "--rejudge", "docs/gate-validation-gather-runs", "--strategy", "cpp"]
    assert main(wrong) == 2
    assert (
        'its runs were not "A/A a comment in impls/cpp.py; injected cpp\'s forward slowed"' in capsys.readouterr().err
    )
    pooled = ["validate-gate", "--rejudge", "docs/gate-validation-gather-runs", "docs/gate-validation-gather-amd-runs"]
    assert main([*pooled, "--strategy", "gather"]) == 2
    assert "--rejudge: runs of several machines (vm-amd-epyc-2cpu-nogpu, vm-intel-xeon" in capsys.readouterr().err


def test_an_option_group_tells_given_options_from_defaults_and_refuses_options_it_could_not_fill():
    import argparse

    from unfold_bench.common_args import OptionGroup, parse_telling_given

    parser = argparse.ArgumentParser(allow_abbrev=False)
    group = OptionGroup(parser.add_argument_group("mode").add_argument)
    group.add_argument("--rounds", type=int, default=8)
    group.add_argument("--every", action="store_true")
    args, (given,) = parse_telling_given(parser, ["--rounds", "8"], group)
    assert given == ["--rounds"] and args.rounds == 8 and args.every is False  # given at its default, and filled
    args, (given,) = parse_telling_given(parser, [], group)
    assert given == [] and args.rounds == 8
    for options in ({"action": "append"}, {"action": "count"}, {"type": Path, "default": "results"}):
        with pytest.raises(ValueError, match="--x: "):
            group.add_argument("--x", **options)


@pytest.mark.parametrize(
    "arguments", [["regress", "nosuchrev"], ["bench", "--commits", "nosuchrev..HEAD"]], ids=["regress", "bench"]
)
def test_an_unknown_revision_is_named_with_gits_reason_and_not_its_usage_hints(arguments, capsys):
    from unfold_bench.commands.bench import NOTHING_RUN

    assert main(arguments) == (NOTHING_RUN if arguments[0] == "bench" else 2)
    err = capsys.readouterr().err
    assert "'nosuchrev" in err and "unknown revision or path not in the working tree" in err
    assert "fatal:" not in err and "Use '--' to separate paths" not in err


def test_a_strategy_named_on_the_command_line_that_cannot_be_loaded_is_refused_before_any_work(tmp_path):
    """What ``--strategy`` names must be kept by the registry: a misspelt module or attribute is refused with why
    before anything runs, not set aside after a whole run (``--bench zzz`` would run nothing, were it not refused)."""
    from unfold_bench.commands.bench import NOTHING_RUN

    command = [sys.executable, "-m", "unfold_bench.cli", "--strategy", "no_such_module_of_theirs:unfold"]
    command += ["--strategy", "tests.helpers:no_such_attribute", "bench", "--bench", "zzz"]
    command += ["--summaries", str(tmp_path)]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ran.returncode == NOTHING_RUN, ran.stdout + ran.stderr
    assert "--strategy 'no_such_module_of_theirs:unfold': cannot be loaded: ModuleNotFoundError" in ran.stderr
    assert "--strategy 'tests.helpers:no_such_attribute': cannot be loaded: AttributeError" in ran.stderr
    assert "no quick-profile cell matches" not in ran.stderr  # refused before the selection is even looked at


@pytest.mark.parametrize(
    "arguments",
    [
        ["capabilities", "--strategies", "native", "--out", "{tmp}"],
        ["advise", "--input-shape", "2,3,8,8", "--kernel-size", "3", "--json", "{tmp}/advice.json"],
        ["stability", "--bench", "zzz", "--keep", "{tmp}"],
        ["agreement", "--rounds", "0"],
        ["context", "--cells", "native, example, cpu"],
        ["regress", "nosuchrev"],
        ["variance", "--round-seconds", "0"],
    ],
    ids=["capabilities", "advise", "stability", "agreement", "context", "regress", "variance"],
)
def test_every_command_that_measures_refuses_a_strategy_the_registry_did_not_keep(
    arguments, tmp_path, monkeypatch, capsys
):
    """As ``bench`` above, from the registry's record (``impls.PLUGIN_UNKEPT``); each command's options would be
    refused for another reason, or run something cheap, were the strategy not refused first."""
    import impls

    monkeypatch.setattr(impls, "PLUGIN_UNKEPT", {"theirs:unfodl": "cannot be loaded: AttributeError: made up"})
    assert main([a.format(tmp=tmp_path) for a in arguments]) == 2
    assert "--strategy 'theirs:unfodl': cannot be loaded: AttributeError: made up" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written: refused before the work
