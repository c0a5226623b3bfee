"""Strategies from outside the repository (``impls.plugins``): loaded from a module a user names or from an
installed package's entry point, checked like a built-in one, and set aside with a reason when they cannot be
loaded or are wrong, while the other strategies' results stand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from benchmarks.cells import Cell, check_cell, gate
from benchmarks.machine import machine_name
from benchmarks.profiles import QUICK
from benchmarks.trees import ROOT
from impls import STRATEGIES
from impls.capabilities import CAPABILITIES, WORKS, check
from impls.plugins import GROUP, VARIABLE, load
from tests.helpers import OUTSIDE


def _install(site: Path, package: str, init: str, version: str, entry_point: str) -> Path:
    """``package`` (its ``__init__.py`` holding ``init``) installed in ``site`` as pip leaves a distribution: its
    ``.dist-info`` (named with dashes) with ``entry_point`` in this project's group; that folder."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(init)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir()
    name = package.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{entry_point}\n")
    return info


def test_a_plain_callable_becomes_a_strategy_that_passes_the_correctness_gate_on_every_quick_config(outside_path):
    found, problems = load("outside_unfold:outside_unfold")
    assert problems == {}
    strategy = found["outside_unfold"]
    assert strategy.origin == "outside_unfold (module)" and strategy.spatial_dims == (1, 2, 3)
    for config in QUICK.configs():
        verdict = check_cell(Cell(strategy, config, "cpu"))
        assert verdict.problem(backward=True) is None, (config.name, verdict)


def test_the_wrapped_strategy_gets_the_suites_argument_validation(outside_path):
    strategy = load("outside_unfold:outside_unfold")[0]["outside_unfold"]
    with pytest.raises(ValueError, match="kernel_size"):
        strategy(torch.ones(1, 1, 4, 4), kernel_size=0)


def test_a_plugin_that_cannot_be_loaded_is_set_aside_with_its_name_and_why(outside_path):
    found, problems = load("outside_broken:anything,outside_bad:not_callable,outside_bad:missing,no_colon")
    assert found == {}
    assert "ModuleNotFoundError" in problems["anything"] and "a_package_that_is_not_installed" in problems["anything"]
    assert "neither a Strategy nor a callable" in problems["not_callable"]
    assert "AttributeError" in problems["missing"]
    assert "not module:attribute" in problems["no_colon"]


def test_a_plugin_is_registered_under_its_strategys_name_and_a_second_one_of_that_name_is_set_aside(
    outside_path, tmp_path, monkeypatch, request
):
    """The cells and pages show a ``Strategy``'s ``name``, so the registry keys it by that name, not by the entry
    point's; the same function reached twice is one plugin, and another plugin of a name one took first is set
    aside with both origins, never swapped in."""
    site = tmp_path / "site"
    init = (
        "import torch\nfrom impls.plugins import wrap\n"
        "STRATEGY = wrap('named_inside', torch.nn.functional.unfold, 'their-strategy 0.1')\n"
    )
    _install(site, "their_strategy", init, "0.1", "theirs = their_strategy:STRATEGY")
    monkeypatch.syspath_prepend(str(site))
    request.addfinalizer(lambda: sys.modules.pop("their_strategy", None))
    # outside_bad re-exports outside_unfold's function: the same plugin; its wrong_shape renamed is another one
    specs = "outside_unfold:outside_unfold,outside_unfold:outside_unfold,outside_bad:outside_unfold"
    found, problems = load(specs + ",their_strategy:STRATEGY")
    assert set(found) == {"named_inside", "outside_unfold"} and problems == {}
    assert found["named_inside"].name == "named_inside" and found["outside_unfold"].origin == "outside_unfold (module)"
    monkeypatch.setattr(sys.modules["outside_bad"], "impostor", sys.modules["outside_bad"].wrong_shape, raising=False)
    found, problems = load("outside_unfold:outside_unfold,outside_bad:impostor,outside_bad:impostor")
    assert set(found) == {"named_inside", "outside_unfold", "impostor"} and problems == {}
    monkeypatch.setattr(sys.modules["outside_bad"], "outside_unfold", sys.modules["outside_bad"].wrong_shape)
    found, problems = load("outside_unfold:outside_unfold,outside_bad:outside_unfold")
    assert found["outside_unfold"].implementation.function is sys.modules["outside_unfold"].outside_unfold
    assert problems == {
        "outside_unfold": "outside_bad (module): the name 'outside_unfold' is taken by outside_unfold (module)"
    }


def test_one_function_under_two_names_is_kept_under_the_first_and_the_second_is_set_aside_naming_both(
    outside_path, tmp_path, monkeypatch, request
):
    """Under two names one function would be two strategies, each benchmarked: two attributes of it named with
    ``--strategy``, or an installed entry point named again with ``--strategy`` under the attribute's name, keep the
    first name (entry points load first) and set the second aside, saying which name keeps it."""
    import outside_bad
    import outside_unfold

    from impls.plugins import describe

    monkeypatch.setattr(outside_bad, "alias", outside_unfold.outside_unfold, raising=False)
    found, problems = load("outside_unfold:outside_unfold,outside_bad:alias")
    assert set(found) == {"outside_unfold"} and set(problems) == {"alias"}
    assert problems["alias"] == (
        "outside_bad (module): the same implementation as 'outside_unfold' (outside_unfold (module)), kept under "
        "that name: as 'alias' too it would be benchmarked twice"
    )
    site = tmp_path / "site"
    init = "from outside_unfold import outside_unfold\n"
    _install(site, "their_unfold", init, "1.0", "theirs = their_unfold:outside_unfold")
    monkeypatch.syspath_prepend(str(site))
    request.addfinalizer(lambda: sys.modules.pop("their_unfold", None))
    found, problems = load("their_unfold:outside_unfold")
    assert set(found) == {"theirs"} and set(problems) == {"outside_unfold"}
    assert "the same implementation as 'theirs' (their-unfold 1.0)" in problems["outside_unfold"]
    assert f"set aside: strategy 'outside_unfold': {problems['outside_unfold']}" in describe(found, problems)


def test_a_plugin_never_takes_a_built_in_name_and_its_function_is_kept_under_its_other_name(outside_path, monkeypatch):
    """A built-in's name is refused as the plugin loads, before the rule for one function under two names: a function
    reached as ``gather`` and as ``outside_unfold`` is kept as ``outside_unfold`` in either order, and ``gather`` is
    set aside saying a built-in has it (a line of ``describe``: bench, advise and capabilities exit non-zero)."""
    import outside_bad
    import outside_unfold

    from impls.plugins import describe

    monkeypatch.setattr(outside_bad, "gather", outside_unfold.outside_unfold, raising=False)
    why = "outside_bad (module): the name 'gather' is taken by a built-in strategy"
    for specs in (
        "outside_bad:gather,outside_unfold:outside_unfold",
        "outside_unfold:outside_unfold,outside_bad:gather",
    ):
        found, problems = load(specs, built_in=STRATEGIES)
        assert set(found) == {"outside_unfold"} and problems == {"gather": why}, specs
        assert found["outside_unfold"].implementation.function is outside_unfold.outside_unfold
        assert f"set aside: strategy 'gather': {why}" in describe(found, problems)


def test_a_built_in_strategys_own_implementation_under_another_name_is_set_aside_naming_it(outside_path, monkeypatch):
    """A module that re-exports a built-in's function (here ``gather``'s) under a name of its own: it would be the
    same strategy twice, benchmarked as the built-in and as the plugin, so it is set aside naming the built-in."""
    import outside_bad

    gather = STRATEGIES["gather"].implementation
    monkeypatch.setattr(outside_bad, "my_gather", gather, raising=False)
    found, problems = load("outside_bad:my_gather", built_in=STRATEGIES)
    assert found == {} and set(problems) == {"my_gather"}
    assert "the same implementation as 'gather' (built in), kept under that name" in problems["my_gather"]
    assert set(load("outside_bad:my_gather")[0]) == {"my_gather"}  # without the built-ins to compare: a plugin


def test_a_named_spec_from_which_no_strategy_is_kept_is_recorded_with_why(outside_path, monkeypatch):
    """What a user named with --strategy and will not see measured, which a command that measures refuses: a spec
    that does not load, or whose strategy loses its name to a built-in; not one whose function is kept under another
    name, whichever comes first."""
    import outside_bad
    import outside_unfold

    monkeypatch.setattr(outside_bad, "gather", outside_unfold.outside_unfold, raising=False)
    for specs in (
        "outside_bad:gather,outside_unfold:outside_unfold",
        "outside_unfold:outside_unfold,outside_bad:gather",
    ):
        unkept: dict[str, str] = {}
        load(specs, built_in=STRATEGIES, unkept=unkept)
        assert unkept == {}, specs
    monkeypatch.setattr(outside_bad, "gather", outside_bad.wrong_values)  # another function under a built-in's name
    unkept = {}
    load("outside_unfold:outside_unfold,outside_bad:gather,outside_bad:missing", built_in=STRATEGIES, unkept=unkept)
    assert set(unkept) == {"outside_bad:gather", "outside_bad:missing"}
    assert unkept["outside_bad:gather"] == "outside_bad (module): the name 'gather' is taken by a built-in strategy"
    assert unkept["outside_bad:missing"].startswith("cannot be loaded: AttributeError")


@pytest.mark.parametrize("name", ["", "my unfold", "mine:v2", "mine, v2", "<b>mine</b>", "-mine", "'mine'"])
def test_a_name_that_would_break_a_cell_a_table_or_a_page_is_refused_naming_it(outside_path, name):
    """An entry point's name becomes the strategy's: one holding a separator or markup is refused, so that plugin is
    set aside (``load`` catches it) before any cell is named after it."""
    from impls.plugins import as_strategy

    found = load("outside_unfold:outside_unfold")[0]["outside_unfold"]
    with pytest.raises(ValueError, match=re.escape(f"name={name!r}")):
        as_strategy(name, found.implementation.function, "test")


@pytest.mark.parametrize(
    ("name", "finding"),
    [
        ("wrong_shape", "1023) torch.float32 on cpu, expected (8, 864, 1024)"),
        ("wrong_values", "wrong output"),
        ("wrong_dtype", "torch.float64 on cpu, expected (8, 864, 1024) torch.float32"),
        ("raises", "this unfold always fails"),
    ],
)
def test_a_wrong_plugin_fails_its_cells_with_the_reason_and_the_others_stand(outside_path, name, finding):
    found, problems = load(f"outside_bad:{name},outside_unfold:outside_unfold")
    assert problems == {}
    config = next(c for c in QUICK.configs() if c.name == "allcnnc-conv2")
    cells = [
        Cell(found[name], config, "cpu"),
        Cell(found["outside_unfold"], config, "cpu"),
        Cell(STRATEGIES["native"], config, "cpu"),
    ]
    verdicts = gate(cells, cache=None)
    assert finding in verdicts[(name, config.name, "cpu")].problem(backward=False)
    assert verdicts[("outside_unfold", config.name, "cpu")].problem(backward=True) is None
    assert verdicts[("native", config.name, "cpu")].problem(backward=True) is None


def test_the_summary_reads_why_a_cell_failed_from_the_verdict_the_gate_kept(outside_path, tmp_path):
    from benchmarks.cells import cached_verdict

    found, _ = load("outside_bad:wrong_values")
    cell = Cell(found["wrong_values"], next(c for c in QUICK.configs() if c.name == "example"), "cpu")
    assert cached_verdict(cell, tmp_path) is None  # nothing kept yet
    verdicts = gate([cell], cache=tmp_path)
    kept = cached_verdict(cell, tmp_path)
    assert kept is not None and kept.problem(backward=False) == verdicts[cell.key].problem(backward=False)
    assert "wrong" in kept.problem(backward=False)


def _registry_in_a_process(env: dict) -> dict:
    """What the registry holds in a fresh process started with ``env`` (as asv's and the gate's children are)."""
    code = (
        "import json; from impls import STRATEGIES, PLUGIN_PROBLEMS; "
        "print(json.dumps({'strategies': {n: s.origin for n, s in STRATEGIES.items()}, 'problems': PLUGIN_PROBLEMS}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_the_registry_of_every_process_takes_the_named_strategies_and_refuses_a_taken_name():
    env = {VARIABLE: "outside_unfold:outside_unfold,outside_broken:x,outside_bad:raises", "PYTHONPATH": str(OUTSIDE)}
    found = _registry_in_a_process({**env, VARIABLE: env[VARIABLE] + ",outside_unfold:outside_unfold"})
    assert found["strategies"]["outside_unfold"] == "outside_unfold (module)"
    assert found["strategies"]["raises"] == "outside_bad (module)"  # loads; the gate finds it wrong
    assert found["strategies"]["native"] is None  # the built-in ones, untouched
    assert "ModuleNotFoundError" in found["problems"]["x"]
    taken = _registry_in_a_process({VARIABLE: "torch.nn.functional:unfold"})  # named "unfold": free
    assert "unfold" in taken["strategies"]


@pytest.mark.slow
def test_a_plugin_under_a_built_in_name_and_a_second_name_is_kept_under_the_second(tmp_path):
    """An installed entry point called ``gather`` (a built-in's name) whose function is named again with
    ``--strategy``: the built-in keeps its name, the plugin's ``gather`` is set aside, and its second name, the
    first one accepted, keeps the plugin (it was set aside as a twin of a name that was then refused)."""
    site = tmp_path / "site"
    _install(
        site,
        "their_unfold",
        "from outside_unfold import outside_unfold\n",
        "1.0",
        "gather = their_unfold:outside_unfold",
    )
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(OUTSIDE)]), VARIABLE: "their_unfold:outside_unfold"}
    found = _registry_in_a_process(env)
    assert found["strategies"]["gather"] is None  # the built-in one
    assert found["strategies"]["outside_unfold"] == "their_unfold (module)"
    assert found["problems"] == {"gather": "their-unfold 1.0: the name 'gather' is taken by a built-in strategy"}


@pytest.mark.slow
def test_a_declared_strategy_may_import_strategy_from_impls_at_its_top(tmp_path):
    """The registry loads the plugins while ``impls`` is being imported: ``Strategy`` is bound by then."""
    found = _registry_in_a_process({VARIABLE: "outside_declared:declared", "PYTHONPATH": str(OUTSIDE)})
    assert found["problems"] == {} and found["strategies"]["outside_declared"] == "outside_declared (module)"
    module = tmp_path / "outside_early.py"
    module.write_text("from impls import get_strategy\n\nearly = get_strategy\n")
    early = _registry_in_a_process({VARIABLE: "outside_early:early", "PYTHONPATH": str(tmp_path)})
    assert "inside a function" in early["problems"]["early"]  # the registry's own names: says where to import them


@pytest.mark.slow
def test_an_installed_packages_entry_point_is_found_with_its_package_and_version(tmp_path):
    """An installed distribution, as pip leaves it on the path: a ``.dist-info`` with its entry points."""
    site = tmp_path / "site"
    init = (OUTSIDE / "outside_unfold.py").read_text()
    info = _install(site, "their_unfold", init, "1.2.3", "theirs = their_unfold:outside_unfold")
    (info / "top_level.txt").write_text("their_unfold\n")
    found = _registry_in_a_process({"PYTHONPATH": str(site)})
    assert found["strategies"]["theirs"] == "their-unfold 1.2.3" and found["problems"] == {}


def test_unfoldnd_through_the_outside_path_computes_what_onehot_computes():
    """The installed unfoldNd package named as an outside strategy gives onehot's output, and works wherever
    onehot works (where onehot declares a defect, the plain callable declares nothing and is left to the checks)."""
    found, problems = load("unfoldNd:unfoldNd")
    assert problems == {}
    outside, onehot = found["unfoldNd"], STRATEGIES["onehot"]
    assert outside.origin.startswith("unfoldNd ")
    for config in QUICK.configs():
        if config.torch_dtype != torch.float32 or onehot.unsupported_reason(
            config.spatial_dims, "cpu", config.torch_dtype
        ):
            continue
        x = config.make_input("cpu", seed=0)
        assert torch.equal(outside(x, **config.unfold_kwargs()), onehot(x, **config.unfold_kwargs())), config.name
    for capability in CAPABILITIES:
        if check(onehot, capability) == WORKS and not capability.startswith("dtype b"):
            assert check(outside, capability) == WORKS, capability


@pytest.mark.slow
def test_an_outside_strategy_is_benchmarked_and_in_the_capability_matrix_with_no_edit_to_impls(tmp_path):
    from benchmarks.runner import scratch_config
    from reports.results import load_results
    from reports.site import build_site

    config = scratch_config(tmp_path, ROOT)
    env = {**os.environ, "PYTHONPATH": str(OUTSIDE)}
    command = [sys.executable, "-m", "unfold_bench.cli", "--strategy", "outside_unfold:outside_unfold", "bench"]
    command += ["--config", str(config), "--bench", "'outside_unfold', 'example', 'cpu'", "--summaries", str(tmp_path)]
    command += ["--ratio-processes", "2"]  # the fewest that give a ratio its interval
    ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "strategies from outside: outside_unfold (outside_unfold (module))" in ran.stdout
    assert "Which to ship: not judged from a selection" in ran.stdout  # one strategy timed: nothing to pick from
    table = load_results(tmp_path / "results")
    mine = table[(table.strategy == "outside_unfold") & (table.config == "example") & (table.device == "cpu")]
    assert set(mine[mine.suite == "unfold"].status) == {"ok"}
    ratios = mine[mine.suite == "ratios"]
    assert set(ratios.status) == {"ok"} and set(ratios.processes) == {2} and ratios.low.notna().all()
    assert set(mine.selection) == {"'outside_unfold', 'example', 'cpu'"}  # a finished run records what it selected
    # Only the new strategy is checked, its row merged into the machine's matrix (here one of native alone).
    matrix_dir = tmp_path / "capabilities"
    matrix_dir.mkdir()
    earlier = {"commit": "e" * 40, "torch": torch.__version__, "capabilities": list(CAPABILITIES)}
    earlier |= {"cells": {"cpu": {"native": dict.fromkeys(CAPABILITIES, WORKS)}}, "machine": machine_name()}
    (matrix_dir / f"{machine_name()}.json").write_text(json.dumps(earlier))
    command = [sys.executable, "-m", "unfold_bench.cli", "--strategy", "outside_unfold:outside_unfold"]
    command += ["capabilities", "--devices", "cpu", "--strategies", "outside_unfold", "--out", str(matrix_dir)]
    ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "capabilities: 1 strategy x" in ran.stdout and "rows of 1 other strategy kept" in ran.stdout
    (record,) = [json.loads(p.read_text()) for p in matrix_dir.glob("*.json")]
    assert list(record["cells"]["cpu"]) == ["native", "outside_unfold"]
    assert record["cells"]["cpu"]["outside_unfold"]["gradient"] == WORKS
    assert record["checked_at"]["cpu"]["native"] == "e" * 40
    build_site(tmp_path / "results", tmp_path / "site", matrix_dir)  # the site, from what the two commands wrote
    strategies_page = (tmp_path / "site" / "strategies.html").read_text()
    assert 'id="outside_unfold"' in strategies_page and "outside_unfold (module)" in strategies_page
    assert "outside_unfold" in (tmp_path / "site" / "index.html").read_text()  # its cells and capability row


@pytest.mark.slow
def test_advise_checks_and_times_an_outside_strategy_and_refuses_a_misspelt_one_before_any_work(tmp_path):
    """A misspelt --strategy is refused before anything is measured, naming it and why (a run without the strategy
    its user named answers another question); the one that loads is then ranked beside the built-in ones."""
    env = {**os.environ, "PYTHONPATH": str(OUTSIDE)}
    report_file = tmp_path / "advice.json"
    arguments = ["advise", "--input-shape", "2,3,6,6", "--kernel-size", "3", "--padding", "1", "--budget", "0.2"]
    arguments += ["--regime", "warm", "--json", str(report_file)]
    command = [sys.executable, "-m", "unfold_bench.cli", "--strategy", "outside_unfold:outside_unfold"]
    misspelt = [*command, "--strategy", "outside_unfold:outside_unfodl", *arguments]
    ran = subprocess.run(misspelt, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 2 and not report_file.exists(), ran.stdout + ran.stderr
    assert "--strategy 'outside_unfold:outside_unfodl': cannot be loaded: AttributeError" in ran.stderr
    assert "geometries" not in ran.stdout  # refused before the layers are counted, let alone measured
    ran = subprocess.run([*command, *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "strategies from outside: outside_unfold (outside_unfold (module))" in ran.stdout
    report = json.loads(report_file.read_text())
    rows = {row["strategy"]: row for row in report["tables"]["warm"]}
    assert {"native", "outside_unfold"} <= rows.keys()
    mine = rows["outside_unfold"]
    assert mine["problem"] == "" and mine["ratio_forward"] > 0 and mine["time_forward"] > 0
    assert "outside_unfold" in ran.stdout  # in the printed table, a candidate like any built-in strategy


def _commit(repo: Path, message: str) -> str:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message], cwd=repo, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


SLOWER = textwrap.dedent(
    '''

    import time as _time

    _fast = outside_unfold


    def outside_unfold(input, kernel_size, dilation=1, padding=0, stride=1):
        """The same unfold, then a spin of three times its own time (an injected slowdown: four times the time, far
        beyond what the short gate below resolves even beside the other test worker)."""
        start = _time.perf_counter()
        out = _fast(input, kernel_size, dilation, padding, stride)
        spent = _time.perf_counter() - start
        while _time.perf_counter() - start < 4.0 * spent:
            pass
        return out
    '''
)


def _gate(repo: Path, base: str, head: str, tmp_path: Path) -> tuple[int, dict]:
    verdict = tmp_path / f"verdict-{head[:8]}.json"
    command = [sys.executable, "-m", "unfold_bench.cli", "regress", base, head, "--repo", str(repo)]
    command += ["--strategy", "outside_unfold:outside_unfold", "--bench", "'outside_unfold', 'example', 'cpu'"]
    # six processes (the one-sided interval at alpha 0.001 needs some degrees of freedom), short ones: a quadrupled
    # time is caught by few blocks, even beside the other test worker (a doubled one was judged unresolved there)
    command += ["--processes", "6", "--rounds-per-process", "1", "--blocks", "8", "--round-seconds", "0.1"]
    command += ["--verdict-file", str(verdict)]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert verdict.exists(), ran.stdout + ran.stderr
    return ran.returncode, json.loads(verdict.read_text())


@pytest.mark.slow
def test_the_gate_judges_a_strategy_of_another_repository_from_each_revisions_tree(tmp_path):
    """A throwaway repository holding only the user's module: a comment-only commit passes, a slowdown fails."""
    repo = tmp_path / "theirs"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    module = repo / "src" / "outside_unfold.py"
    module.write_text((OUTSIDE / "outside_unfold.py").read_text())
    start = _commit(repo, "their unfold")
    module.write_text(module.read_text() + "\n# a comment only\n")
    comment = _commit(repo, "a comment")
    module.write_text(module.read_text() + SLOWER)
    slower = _commit(repo, "slower")

    status, verdict = _gate(repo, start, comment, tmp_path)
    assert status == 0 and verdict["status"] == 0, verdict
    assert {c["cell"] for c in verdict["cells"]} >= {"forward outside_unfold, example, cpu"}
    status, verdict = _gate(repo, comment, slower, tmp_path)
    assert status == 1, verdict
    flagged = [c for c in verdict["cells"] if c["verdict"] == "regression"]
    assert any(c["cell"].startswith("forward ") for c in flagged), verdict


def test_the_gate_says_a_strategy_of_another_repository_that_loads_from_neither_revision_with_no_traceback(tmp_path):
    """A typo in --strategy's attribute: each revision's tree says why it does not load, naming --strategy (not
    impls), and the gate stops with exit status 2 and no traceback, before any process is started."""
    repo = tmp_path / "theirs"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "src" / "outside_unfold.py").write_text((OUTSIDE / "outside_unfold.py").read_text())
    start = _commit(repo, "their unfold")
    verdict = tmp_path / "verdict.json"
    command = [sys.executable, "-m", "unfold_bench.cli", "regress", start, start, "--repo", str(repo)]
    command += ["--strategy", "outside_unfold:outside_unfodl", "--verdict-file", str(verdict), "--processes", "4"]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 2 and "Traceback" not in out, out
    assert "paired: --strategy 'outside_unfold:outside_unfodl' does not load from worktree-head: AttributeError" in out
    assert "GATE ERROR: --strategy 'outside_unfold:outside_unfodl' loads from neither revision (above)" in out
    assert json.loads(verdict.read_text())["status"] == 2
