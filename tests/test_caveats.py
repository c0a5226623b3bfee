"""Declared caveats are checked both ways, so the registry's claims cannot go stale.

``exact_with_nonfinite``: a strategy that claims it must reproduce inf/NaN exactly where the reference
puts them; one that disclaims it must really differ (e.g. a convolution's ``0 * inf = NaN``).
``exact_under_tf32``: on CUDA with TF32 allowed (PyTorch's default for cuDNN convolutions), a strategy
whose float32 output is not bit-exact must declare it; the parity tests run with TF32 off.
"""

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from benchmarks.trees import ROOT
from impls import TESTED_STRATEGIES
from impls.cpu_isa import onednn_isa
from impls.reference import reference_unfold
from impls.strategy import KnownDefect
from tests.conftest import CUDA
from tests.helpers import skip_unless_supported


@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_nonfinite_declaration_matches_behaviour(name, device):
    strategy = TESTED_STRATEGIES[name]
    skip_unless_supported(strategy, 2, device)
    x = torch.randn(1, 2, 6, 6, device=device)
    x[0, 0, 2, 2] = float("inf")
    x[0, 1, 4, 1] = float("nan")
    out, expected = strategy(x, 3, padding=1), reference_unfold(x, 3, padding=1)
    exact = torch.equal(out.isnan(), expected.isnan()) and torch.equal(out.nan_to_num(0.0), expected.nan_to_num(0.0))
    assert exact == strategy.exact_with_nonfinite, (
        f"{name} declares exact_with_nonfinite={strategy.exact_with_nonfinite} but is "
        f"{'exact' if exact else 'not exact'} on inf/NaN input"
    )


@pytest.mark.cuda
@pytest.mark.parametrize("device", [CUDA])
@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_tf32_difference_is_detected_and_declared(name, device):
    strategy = TESTED_STRATEGIES[name]
    # Values with more mantissa bits than TF32 keeps, so TF32 rounding would show.
    x = (1.0 + torch.rand(8, 16, 12, 12, device=device) * 2**-12).float()
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    out = strategy(x, 3, padding=1)
    expected = reference_unfold(x, 3, padding=1)
    exact = torch.equal(out, expected)
    has_tf32 = torch.cuda.get_device_capability(device)[0] >= 8  # Ampere and newer
    if strategy.exact_under_tf32:
        assert exact, f"{name} declares exact_under_tf32 but its float32 output changed with TF32 allowed"
        return
    max_error = (out - expected).abs().max().item()
    print(f"{name}: float32 with TF32 allowed {'is exact' if exact else f'differs, max error {max_error:.3g}'}")
    assert max_error <= 2**-10 * expected.abs().max().item(), "differs by more than TF32 rounding"
    if has_tf32:
        assert not exact, f"{name} declares exact_under_tf32=False but is exact on a TF32-capable GPU"


DEFECTS = [(name, defect) for name, s in TESTED_STRATEGIES.items() for defect in s.known_defects]


def _run_reproducer(name: str, defect) -> str:
    """Code that runs a defect's reproducer through the raw implementation and prints 'exact' or 'wrong'."""
    _, kwargs, _ = defect.reproducer
    index = TESTED_STRATEGIES[name].known_defects.index(defect)
    return (
        "import torch\n"
        "from impls import TESTED_STRATEGIES, parse\n"
        "from impls.reference import reference_unfold\n"
        f"x = TESTED_STRATEGIES[{name!r}].known_defects[{index}].reproducer_input()\n"
        f"kwargs = {kwargs!r}\n"
        f"raw = TESTED_STRATEGIES[{name!r}].implementation(x, parse(x, **kwargs))\n"
        "print('exact' if torch.equal(raw, reference_unfold(x, **kwargs)) else 'wrong')\n"
    )


@pytest.mark.parametrize(
    "name,defect", DEFECTS, ids=[f"{n}-{d.device}-{d.dtype}-{d.effect.replace(' ', '-')}" for n, d in DEFECTS]
)
@pytest.mark.slow
def test_known_defect_is_refused_where_the_record_allows_it_and_real_where_seen(name, defect):
    """The strategy refuses the input unless this CPU is recorded free of the defect, and the record holds here.

    The reproducer runs in a subprocess, so a defect that crashes the process is observed, not suffered.
    On a CPU whose oneDNN ISA the defect lists in ``seen_on`` it must show; in ``not_seen_on`` it must run exact
    and the input be accepted; on a CPU the record does not know, the input is refused, and a defect that shows
    fails until the ISA is added to ``seen_on`` (an exact run skips, naming the ISA to add to ``not_seen_on``).
    """
    strategy = TESTED_STRATEGIES[name]
    if defect.device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    shape, kwargs, _ = defect.reproducer
    x = defect.reproducer_input()
    isa = onednn_isa() if defect.device == "cpu" else None
    this_torch = torch.__version__.split("+")[0]
    recorded_free = defect.device == "cpu" and this_torch == defect.observed_on and isa in defect.not_seen_on
    reason = strategy.unsupported_reason(len(shape) - 2, x.device, x.dtype)
    if recorded_free:
        assert reason is None, f"{name} refuses {defect.dtype} on oneDNN ISA {isa!r}, recorded free of it: {reason}"
    else:
        assert reason is not None and "refuses" in reason, f"{name} accepts {defect.dtype} on ISA {isa!r}: {reason}"
        if defect.effect != "crash":  # where a refusal were lost, a crash would take this process down
            with pytest.raises(ValueError, match="refuses"):
                strategy(x, **kwargs)
    if this_torch != defect.observed_on:
        pytest.skip(
            f"defect recorded on torch {defect.observed_on}, this is {torch.__version__}: the input stays refused; "
            "run the reproducer here to see whether the refusal still applies"
        )
    code = _run_reproducer(name, defect)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    shows = result.returncode < 0 if defect.effect == "crash" else result.stdout.strip() == "wrong"
    if defect.effect == "wrong values" or result.returncode >= 0:
        assert result.returncode == 0, result.stderr[-2000:]
    observed = f"exit code {result.returncode}, output {result.stdout.strip()!r}"
    if defect.device == "cpu" and isa in defect.not_seen_on:
        assert not shows and result.stdout.strip() == "exact", (
            f"{name}'s defect ({defect.description}) is recorded as not seen on oneDNN ISA {isa!r}, but it shows "
            f"here ({observed}); move {isa!r} from not_seen_on to seen_on"
        )
        return
    if defect.device == "cpu" and isa not in defect.seen_on:
        assert not shows, (
            f"{name}'s defect ({defect.description}) shows on this CPU ({observed}), whose oneDNN ISA {isa!r} the "
            "record does not list: add it to seen_on, so the tests show the defect wherever that ISA runs them"
        )
        pytest.skip(
            f"{name}'s defect ({defect.description}) does not show on this CPU (oneDNN ISA {isa!r}), which the "
            f"record does not know: {observed}. The input stays refused; add the ISA to not_seen_on"
        )
    assert shows, (
        f"{name} no longer shows its declared defect ({defect.description}) "
        f"{f'on oneDNN ISA {isa!r}, where it was seen' if isa else ''}: {observed}; "
        "remove or reclassify the KnownDefect"
    )


def _defect(**record: object) -> KnownDefect:
    return KnownDefect("cpu", torch.float16, "crash", "made up", ((1, 1, 3), {"kernel_size": 2}, 0), **record)


def test_a_cpu_defect_is_refused_unless_this_isa_and_torch_are_recorded_free_of_it(monkeypatch):
    monkeypatch.setattr("impls.strategy.onednn_isa", lambda: "ISA B")
    this_torch = torch.__version__.split("+")[0]
    native = TESTED_STRATEGIES["native"]
    x = torch.zeros(1, 1, 3, dtype=torch.float16)
    for record, refused in [
        ({"seen_on": ("ISA A",), "not_seen_on": ("ISA B",)}, False),  # recorded free here
        ({"seen_on": ("ISA B",), "not_seen_on": ("ISA A",)}, True),  # seen here
        ({"not_seen_on": ("ISA A",)}, True),  # this ISA unrecorded: refused, a crash would kill the run
        ({"not_seen_on": ("ISA B",), "observed_on": "0.0"}, True),  # free here on another torch only
    ]:
        defect = _defect(**{"observed_on": this_torch, **record})
        assert defect.refuses("cpu", torch.float16) == refused, record
        assert not defect.refuses("cpu", torch.float32) and not defect.refuses("cuda", torch.float16)
        strategy = dataclasses.replace(native, known_defects=(defect,))
        if refused:
            with pytest.raises(ValueError, match=r"refuses torch.float16 on cpu: made up .*'ISA B'"):
                strategy(x, kernel_size=2)
        else:
            assert torch.equal(strategy(x, kernel_size=2), native(x, kernel_size=2))


def _probe_answering(monkeypatch, isa: str) -> list[int]:
    """Make the ISA probe answer ``isa`` without starting a process; the list counts the probes."""
    import impls.cpu_isa

    probes: list[int] = []

    def run(*args, **kwargs):
        probes.append(1)
        return subprocess.CompletedProcess(args, 0, stdout=f"onednn_verbose,info,cpu,isa:{isa}\n", stderr="")

    monkeypatch.setattr(impls.cpu_isa.subprocess, "run", run)
    monkeypatch.setattr(impls.cpu_isa.torch.backends.mkldnn, "is_available", lambda: True)
    return probes


def test_a_child_takes_the_isa_its_parent_handed_down_instead_of_probing(monkeypatch):
    from impls.cpu_isa import ISA_VARIABLE, isa_environment

    probes = _probe_answering(monkeypatch, "ISA P")
    onednn_isa.cache_clear()
    try:
        handed_down = isa_environment()[ISA_VARIABLE]  # the parent probes once
        onednn_isa.cache_clear()  # a child: a process of its own
        monkeypatch.setenv(ISA_VARIABLE, handed_down)
        assert onednn_isa() == "ISA P" and len(probes) == 1
    finally:
        onednn_isa.cache_clear()


@pytest.mark.parametrize(
    ("isa", "differs"),
    [
        (None, {"torch": "0.0.0"}),  # another torch may dispatch otherwise
        ("ISA X", {"ONEDNN_MAX_CPU_ISA": "AVX2"}),  # another cap
        ("ISA X", None),  # not the record isa_environment writes
    ],
)
def test_a_child_probes_for_itself_when_its_parents_answer_was_probed_under_another_torch_or_cap(
    monkeypatch, isa, differs
):
    from impls.cpu_isa import ISA_VARIABLE, probed_under

    probes = _probe_answering(monkeypatch, "ISA P")
    record = isa if differs is None else json.dumps({"isa": isa, "under": {**probed_under(), **differs}})
    monkeypatch.setenv(ISA_VARIABLE, record)
    onednn_isa.cache_clear()
    try:
        assert onednn_isa() == "ISA P" and len(probes) == 1
    finally:
        onednn_isa.cache_clear()


@pytest.mark.parametrize("commits", [False, True])
def test_a_benchmark_run_hands_its_processes_this_machines_isa_unless_asv_builds_their_torch(monkeypatch, commits):
    from impls.cpu_isa import ISA_VARIABLE
    from unfold_bench.commands import bench

    class RegisteredError(Exception):
        pass

    def register(name=None, regime="warm", environ=None):
        raise RegisteredError(environ)

    monkeypatch.setattr(bench, "register_machine", register)
    with pytest.raises(RegisteredError) as registered:
        bench.main(["--commits", "HEAD~1..HEAD"] if commits else ["--bench", "'gather', 'example'"])
    environ = registered.value.args[0]
    if commits:  # asv's own virtualenvs may hold another torch
        assert ISA_VARIABLE not in environ
    else:
        assert json.loads(environ[ISA_VARIABLE])["isa"] == onednn_isa()


def test_onednn_isa_names_an_instruction_set_where_onednn_is_present():
    isa = onednn_isa()
    if not torch.backends.mkldnn.is_available():
        assert isa is None
        return
    assert isinstance(isa, str) and isa, f"oneDNN is available but its verbose log named no ISA: {isa!r}"


def test_an_isa_cannot_be_both_seen_and_not_seen():
    with pytest.raises(ValueError, match="both seen_on and not_seen_on"):
        KnownDefect(
            "cpu", torch.float16, "crash", "x", ((1, 1, 3), {"kernel_size": 2}, 0), seen_on=("A",), not_seen_on=("A",)
        )
