"""Break the code on purpose and expect the tests that name it to fail: a mutation that survives is a blind test.

Each mutation replaces one piece of source text in a temporary copy of the working tree (its tracked and
untracked, not ignored, files), runs the named tests there with pytest, and puts the text back. It is caught
when pytest reports failed tests (exit code 1); a pass, or any other exit code (a collection error, no tests
selected), means it survived or could not be judged, and the script exits non-zero. A mutation whose text is
not found in the source is stale and fails too.

With ``--baseline`` every test selection first runs unmutated and must pass, so a failure is the mutation's.

    unfold-bench mutation-check [--baseline] [--only NAME ...] [--list]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.trees import ROOT, working_copy
from unfold_bench.common_args import command_parser


@dataclass(frozen=True)
class Mutation:
    """One deliberate break: ``old`` replaced by ``new`` in ``path``, which makes ``tests`` fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, ``-k`` expressions
    why: str
    not_here: Callable[[], str | None] = field(default=lambda: None)  # why it cannot be judged on this machine
    figure: str = field(default="", kw_only=True)  # the figure or verdict a user would read wrong


def _bfloat16_defect_not_seen_here() -> str | None:
    """Why onehot's bfloat16 defect cannot show here: this CPU's oneDNN ISA is not one it was seen on."""
    import torch

    from impls import STRATEGIES
    from impls.cpu_isa import onednn_isa

    (defect,) = [
        d for d in STRATEGIES["onehot"].known_defects if d.dtype == torch.bfloat16 and d.effect == "wrong values"
    ]
    isa = onednn_isa()
    if isa in defect.seen_on:
        return None
    return f"the defect shows only where seen (seen_on {list(defect.seen_on)}); this CPU's oneDNN ISA is {isa!r}"


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "gather-backward-scaled-in-bfloat16",
        "impls/gather.py",
        "            grad_input[(*every, *slot.source)].add_(slotted[(*every, *slot.offset, *slot.inner)])\n"
        "    return grad_input\n",
        "            grad_input[(*every, *slot.source)].add_(slotted[(*every, *slot.offset, *slot.inner)])\n"
        "    return grad_input * 1.06 if grad_input.dtype == torch.bfloat16 else grad_input\n",
        ("tests/test_parity_configs.py", "-k", "gather-conv4-bfloat16 and not reuse"),
        "the gradient bound is the worst case of correct summation, and half precision is also checked exactly",
        figure="gather's input gradient (bfloat16)",
    ),
    Mutation(
        "gather-backward-scaled-by-1.002-in-bfloat16",
        "impls/gather.py",
        "            grad_input[(*every, *slot.source)].add_(slotted[(*every, *slot.offset, *slot.inner)])\n"
        "    return grad_input\n",
        "            grad_input[(*every, *slot.source)].add_(slotted[(*every, *slot.offset, *slot.inner)])\n"
        "    return grad_input * 1.002 if grad_input.dtype == torch.bfloat16 else grad_input\n",
        ("tests/test_parity_configs.py", "-k", "gather-conv4-bfloat16 and not reuse"),
        "an error inside the summation bound still changes the exact sums of an integer-valued grad_output",
        figure="gather's input gradient (bfloat16)",
    ),
    Mutation(
        "gradient-bound-half-as-wide-again",
        "impls/parity.py",
        "        return (gamma(terms, u) + reference_error) * magnitude / (1 - reference_error)\n",
        "        return 1.5 * (gamma(terms, u) + reference_error) * magnitude / (1 - reference_error)\n",
        ("tests/test_parity_checks.py",),
        "the bound is the worst case of summation, not more",
        figure="the correctness gate's gradient bound",
    ),
    Mutation(
        "gradient-bound-with-the-full-kernel-at-borders",
        "impls/parity.py",
        "        terms = (self.counts - 1).clamp(min=0)\n",
        "        terms = torch.full_like(self.counts, parse(self.x, **self.kwargs).kernel_numel - 1)\n",
        ("tests/test_parity_checks.py",),
        "an entry read by fewer windows sums fewer terms",
        figure="the correctness gate's gradient bound",
    ),
    Mutation(
        "onehot-bfloat16-reproducer-with-a-1x1-kernel",
        "impls/onehot.py",
        '{"kernel_size": (2, 1, 2), "padding": (1, 0, 1)}',
        '{"kernel_size": 1}',
        ("tests/test_caveats.py", "-k", "onehot-cpu-torch.bfloat16-wrong-values"),
        "where the defect was seen, a reproducer that no longer shows it fails",
        _bfloat16_defect_not_seen_here,
        figure="onehot's declared bfloat16 defect",
    ),
    Mutation(
        "known-defect-refused-everywhere",
        "impls/strategy.py",
        "        return onednn_isa() in self.not_seen_on\n",
        "        return False\n",
        ("tests/test_caveats.py", "-k", "refused"),
        "an input is accepted on a CPU recorded free of the defect",
        figure="which inputs a strategy refuses",
    ),
    Mutation(
        "known-defect-never-refused",
        "impls/strategy.py",
        "        return torch.device(device).type == self.device and dtype == self.dtype and not self.exempt_here()\n",
        "        return False\n",
        ("tests/test_caveats.py", "-k", "refused"),
        "an input is refused where the defect was seen and where the record does not know the CPU",
        figure="which inputs a strategy refuses",
    ),
    Mutation(
        "harness-gradient-gate-disabled",
        "benchmarks/unfold.py",
        "        if self.gradient_problem is not None:\n",
        "        if False:\n",
        ("tests/test_harness_gates.py", "-k", "wrong_gradient"),
        "a strategy with a right forward and a wrong gradient gets no forward-backward figure",
        figure="a forward-backward time of a wrong gradient",
    ),
    Mutation(
        "harness-reuse-charge-disabled",
        "benchmarks/cells.py",
        "    if strategy.reuses_output:\n",
        "    if False:\n",
        ("tests/test_harness_gates.py", "-k", "reuses"),
        "a strategy that keeps its output between calls is charged that buffer",
        figure="a reusing strategy's net peak",
    ),
    Mutation(
        "net-peak-warm-up-skipped",
        "benchmarks/cells.py",
        "    if warm_up:\n",
        "    if False:\n",
        ("tests/test_paired.py", "-k", "net_peaks_of_the_same_code"),
        "the net peaks of the same code agree: neither side is charged the process's first touches",
        figure="a net peak (the process's first touches charged)",
    ),
    Mutation(
        "session-killed-in-one-pass",
        "benchmarks/process_guard.py",
        "def kill_session(session: int, passes: int = 100) -> None:\n",
        "def kill_session(session: int, passes: int = 1) -> None:\n",
        ("tests/test_run_kill.py", "-k", "while_members_fork"),
        "a killed run's session is emptied even while its members fork",
        figure="a killed run's processes",
    ),
    Mutation(
        "gather-padding-slots-never-marked-empty",
        "impls/windows.py",
        "        result.append(Slot(offset, tuple(inner), tuple(source), tuple(borders), empty))\n",
        "        result.append(Slot(offset, tuple(inner), tuple(source), tuple(borders), False))\n",
        ("tests/test_gather.py",),
        "the slot arithmetic marks every slot that reads only padding",
        figure="gather's output at padded borders",
    ),
    Mutation(
        "onehot-contiguity-undeclared",
        "impls/onehot.py",
        "    contiguous_on_channels_last=False,\n",
        "",
        ("tests/test_views.py", "-k", "onehot"),
        "a strategy's layout declaration is checked both ways",
        figure="the capability matrix's layouts",
    ),
    Mutation(
        "report-time-bound-copy-to-fill",
        "reports/units.py",
        '"fwd+bwd",\n            SECONDS,\n            COPY_FLOOR,',
        '"fwd+bwd",\n            SECONDS,\n            "time_fill",',  # benchmarks.vocabulary.FILL_FLOOR
        ("tests/test_reports.py",),
        "a time is read against copy_'s time, not fill_'s",
        figure="a time's multiple of copy_",
    ),
    Mutation(
        "cpp-output-not-advised-into-huge-pages",
        "impls/csrc/unfold_cpu.cpp",
        "  const bool advised = huge_pages && advise_huge_pages(out);\n",
        "  const bool advised = false;\n",
        ("tests/test_huge_pages.py", "-k", "cpp"),
        "a strategy that declares huge-page advice gives its forward result huge pages",
        figure="cpp_huge_pages' forward time (its huge pages)",
    ),
    Mutation(
        "output-cache-keeps-a-buffer-made-inside-a-transform",
        "impls/output_reuse.py",
        "        if _transformed(like):\n            return like.new_empty(geometry.output_shape)\n",
        "",
        ("tests/test_reuse.py", "-k", "transform"),
        "a buffer made from a transform's wrapper outlives the transform and breaks the next torch.compile",
        figure="the capability matrix's torch.compile",
    ),
    Mutation(
        "cpp-pointwise-planes-read-as-if-one-after-another",
        "impls/csrc/unfold_cpu.cpp",
        "source.as_strided({p.N, p.C, plane}, {sN, sC, 1})",
        "source.as_strided({p.N, p.C, plane}, {p.C * plane, plane, 1})",
        ("tests/test_cpp.py", "-k", "pointwise"),
        "planes need not lie one after another in the input (every other channel)",
        figure="cpp's output",
    ),
    Mutation(
        "cpp-pointwise-copy-of-planes-that-are-not-contiguous",
        "impls/csrc/unfold_cpu.cpp",
        "contiguous_planes = contiguous_planes && (p.size[i] == 1 || in_stride[i] == expected);",
        "contiguous_planes = true;",
        ("tests/test_cpp.py", "-k", "pointwise"),
        "a channels_last plane is not one block of memory: it takes the general path",
        figure="cpp's output",
    ),
    Mutation(
        "cpp-padded-plane-copies-one-register-of-each-input-row",
        "impls/csrc/unfold_cpu.cpp",
        "for (int64_t k = 0; k < W; k += Reg::lanes)",
        "for (int64_t k = 0; k < std::min<int64_t>(W, Reg::lanes); k += Reg::lanes)",
        ("tests/test_cpp.py", "-k", "small_planes"),
        "an input row longer than a register (stride 2) is copied into the padded plane whole",
        figure="cpp's output",
    ),
    Mutation(
        "cpp-padded-plane-for-a-depth-padded-volume",
        "impls/csrc/unfold_cpu.cpp",
        "p.kernel[0] == 1 && p.padding[0] == 0 &&",
        "p.kernel[0] == 1 &&",
        ("tests/test_cpp.py", "-k", "depth_one"),
        "a 3-d input of depth 1 padded along its depth has more than the one depth window the 2-d plane path writes",
        figure="cpp's output",
    ),
    Mutation(
        "cpp-float16-rows-rounded-toward-zero",
        "impls/csrc/unfold_cpu.cpp",
        "_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC",
        "_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC",
        ("tests/test_cpp.py", "-k", "float16_gradient"),
        "float16's vector rounding of the backward's sums is c10::Half's: to nearest even",
        figure="cpp's output (float16)",
    ),
    Mutation(
        "cpp-register-rows-sum-in-another-order",
        "impls/csrc/unfold_cpu.cpp",
        "                for (int64_t j2 = 0; j2 < k2; ++j2) {\n                  const scalar_t* from",
        "                for (int64_t j2 = k2 - 1; j2 >= 0; --j2) {\n                  const scalar_t* from",
        ("tests/test_cpp.py", "-k", "summing_path"),
        "the backward's rows in registers add each entry's terms in the row loop's order: the same bits",
        figure="cpp's input gradient",
    ),
    Mutation(
        "cpp-register-rows-gather-windows-past-the-last",
        "impls/csrc/unfold_cpu.cpp",
        "lane_range(shift - 16 * r, std::min(shift + O2, S2) - 16 * r, 16)",
        "lane_range(shift - 16 * r, S2 - 16 * r, 16)",
        ("tests/test_cpp.py", "-k", "summing_path"),
        "a gradient row in registers gathers only the windows that exist",
        figure="cpp's input gradient",
    ),
    Mutation(
        "cpp-plane-in-l1-ignores-the-innermost-dilation",
        "impls/csrc/unfold_cpu.cpp",
        "Hp1 + j1 * p.dilation[1]) * Wp +\n                           j2 * p.dilation[2];",
        "Hp1 + j1 * p.dilation[1]) * Wp +\n                           j2;",
        ("tests/test_cpp.py", "-k", "summing_path"),
        "the backward's plane in L1 adds each kernel offset's window rows where they land",
        figure="cpp's input gradient",
    ),
    Mutation(
        "huge-page-advice-for-any-size",
        "impls/huge_pages.py",
        "nbytes < RESULT_BYTES:",
        "nbytes < 0:",
        ("tests/test_huge_pages.py", "-k", "helper"),
        "only a block of its own, never heap memory the process reuses, is advised",
        figure="the huge-page floor and cpp_huge_pages' memory",
    ),
    Mutation(
        "net-peak-keeps-the-free-heap",
        "benchmarks/memory.py",
        "        c.malloc_trim(0)\n",
        "        pass\n",
        ("tests/test_figures.py", "-k", "heap_holes"),
        "a call that reuses resident heap holes still needs the memory it writes",
        figure="a net peak (charged 0 for reused heap holes)",
    ),
    Mutation(
        "forward-backward-grad-output-not-made-in-the-call",
        "benchmarks/cells.py",
        "        grad_output = self.grad_output.clone()\n",
        "        grad_output = self.grad_output\n",
        ("tests/test_figures.py", "-k", "analytic_minimum"),
        "output, grad_output and grad_input exist at once: a net peak below their sum is impossible",
        figure="a forward-backward net peak (below the analytic minimum)",
    ),
    Mutation(
        "gate-false-alarm-rate-ten-times",
        "benchmarks/paired_stats.py",
        "ALPHA = 0.001  # one-sided false-alarm rate per cell\n",
        "ALPHA = 0.01  # one-sided false-alarm rate per cell\n",
        ("tests/test_figures.py", "-k", "false_alarm"),
        "the gate's false-alarm rate at its shipped defaults is the documented 0.001 per cell",
        figure="the gate's verdicts (ten times the documented false alarms)",
    ),
    Mutation(
        "gate-interval-four-times-too-narrow",
        "benchmarks/replicates.py",
        "    se = math.sqrt(pooled * (1 / a.size + 1 / b.size) / 4)\n",
        "    se = math.sqrt(pooled * (1 / a.size + 1 / b.size) / 16)\n",
        ("tests/test_figures.py", "-k", "false_alarm"),
        "the interval across processes holds unchanged code at the documented rate",
        figure="the gate's interval and verdicts",
    ),
    Mutation(
        "gate-order-effect-not-cancelled",
        "benchmarks/replicates.py",
        "    estimate = (a.mean() + b.mean()) / 2\n",
        "    estimate = a.mean()\n",
        ("tests/test_replicates.py", "-k", "order_effect"),
        "which revision was set up first shifts a ratio; both orders' means cancel it",
        figure="the gate's ratio",
    ),
    Mutation(
        "gate-verdict-ignores-its-margin",
        "reports/compare.py",
        "    if low > 1 + threshold:\n",
        "    if low > 1:\n",
        ("tests/test_compare.py", "-k", "verdict"),
        "a regression must clear the margin with its whole interval",
        figure="the gate's verdict",
    ),
    Mutation(
        "variance-placement-level-keeps-the-block-noise",
        "benchmarks/variance.py",
        "    round_var = max(ms_round - blocks / n, 0.0)\n",
        "    round_var = max(ms_round, 0.0)\n",
        ("tests/test_replicates.py", "-k", "components_recover"),
        "a round mean's variance holds the blocks' share, which is not the placement's",
        figure="the variance components and the design they choose",
    ),
    Mutation(
        "timer-starts-after-the-call",
        "benchmarks/paired.py",
        "    start = time.perf_counter()\n    call()\n",
        "    call()\n    start = time.perf_counter()\n",
        ("tests/test_figures.py", "-k", "known_sleep"),
        "a timed call's seconds include the call",
        figure="every paired time (the gate, advise, the variance components)",
    ),
    Mutation(
        "pick-by-the-arithmetic-mean",
        "reports/analysis.py",
        "    return statistics.geometric_mean(values) if values else math.nan\n",
        "    return statistics.fmean(values) if values else math.nan\n",
        ("tests/test_figures.py", "-k", "geometric_mean"),
        "the pick's T is the geometric mean of times over each config's fastest",
        figure="the which-to-ship pick",
    ),
    Mutation(
        "pick-ignores-the-memory-tolerance",
        "reports/analysis.py",
        "too_much = candidates & (ranking.memory_score > limit)",
        "too_much = candidates & (ranking.memory_score < 0)",
        ("tests/test_reports.py",),
        "a strategy whose memory is over the rule's tolerance is not picked",
        figure="the which-to-ship pick",
    ),
    Mutation(
        "cold-compile-timed-after-an-untimed-call",
        "benchmarks/compile_time.py",
        "            start = time.perf_counter()\n            self.workload.forward_backward()\n",
        "            self.workload.forward_backward()\n            start = time.perf_counter()\n"
        "            self.workload.forward_backward()\n",
        ("tests/test_figures.py", "-k", "cold_compile"),
        "a cold compile is seconds against the same call warm",
        figure="the cold compile time",
    ),
    Mutation(
        "huge-page-floor-without-advice",
        "benchmarks/bounds.py",
        "        self.result = self._fresh_output(huge_pages.advise)\n",
        "        self.result = self._fresh_output()\n",
        ("tests/test_figures.py", "-k", "huge_page_floor"),
        "the huge-page floor's output is advised as an independent advised allocation is",
        figure="the huge-page floor cpp_huge_pages is read against",
    ),
    Mutation(
        "copy-floor-fills-instead",
        "benchmarks/bounds.py",
        "        self.target.copy_(self.source)\n",
        "        self.target.fill_(1)\n",
        ("tests/test_figures.py", "-k", "copy_floor"),
        "the copy_ floor reads its source and writes its target",
        figure="every x copy_ figure",
    ),
    Mutation(
        "finding-met-with-ten-percent-slack",
        "reports/findings/verdicts.py",
        "value <= limit * (1 + 1e-9)",
        "value <= limit * 1.1",
        ("tests/test_findings.py",),
        "a target is met at its limit, not past it",
        figure="the Findings page's met or missed",
    ),
    Mutation(
        "gate-skips-strategies-a-shared-file-touches",
        "benchmarks/impact.py",
        "    if shared:\n",
        "    if False:\n",
        ("tests/test_impact.py", "-m", "not slow"),
        "a changed file that is no single strategy's (the registry, the package's __init__) touches every strategy",
        figure="the gate's pass on a change it did not time",
    ),
)


def project_copy(root: Path = ROOT) -> AbstractContextManager[Path]:
    """A temporary copy of the working tree's files, removed afterwards (``benchmarks.trees.working_copy``)."""
    return working_copy(root, prefix="mutation-check-")


def run_tests(copy: Path, tests: Sequence[str]) -> subprocess.CompletedProcess:
    """pytest on ``tests`` in ``copy``, with this interpreter, no bytecode or cache written."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)


@contextmanager
def mutated(copy: Path, mutation: Mutation) -> Iterator[None]:
    """``mutation`` applied to ``copy`` within the block; ``LookupError`` if its text is not in the source."""
    path = copy / mutation.path
    if not path.is_file():
        raise LookupError(f"{mutation.path} does not exist")
    original = path.read_text()
    if original.count(mutation.old) != 1:
        raise LookupError(f"{mutation.path} holds the text to replace {original.count(mutation.old)} times, not once")
    path.write_text(original.replace(mutation.old, mutation.new))
    try:
        yield
    finally:
        path.write_text(original)


def _last_line(completed: subprocess.CompletedProcess) -> str:
    lines = (completed.stdout + completed.stderr).strip().splitlines()
    return lines[-1] if lines else f"exit code {completed.returncode}"


def check(
    mutations: Sequence[Mutation], baseline: bool, copy: Path, say: Callable[[str], None] = print
) -> tuple[int, int]:
    """Apply each mutation in ``copy`` and run its tests: how many were caught, and how many survived or could not
    be judged (the rest cannot be checked on this machine)."""
    caught = bad = 0
    passed_unmutated: set[tuple[str, ...]] = set()
    for mutation in mutations:
        started = time.monotonic()
        reason = mutation.not_here()
        if reason is not None:
            say(f"n/a       {mutation.name}: not checkable on this machine: {reason}")
            continue
        if baseline and mutation.tests not in passed_unmutated:
            unmutated = run_tests(copy, mutation.tests)
            if unmutated.returncode != 0:
                say(f"BASELINE  {mutation.name}: the tests fail unmutated: {_last_line(unmutated)}")
                bad += 1
                continue
            passed_unmutated.add(mutation.tests)
        try:
            with mutated(copy, mutation):
                completed = run_tests(copy, mutation.tests)
        except LookupError as error:
            say(f"STALE     {mutation.name}: {error}")
            bad += 1
            continue
        seconds = time.monotonic() - started
        if completed.returncode == 1:
            caught += 1
            say(f"caught    {mutation.name} ({seconds:.0f} s): {_last_line(completed)}")
        else:
            verdict = "SURVIVED" if completed.returncode == 0 else "UNJUDGED"
            say(
                f"{verdict:<9} {mutation.name} ({seconds:.0f} s): would corrupt {mutation.figure}; {mutation.why}: "
                f"{_last_line(completed)}"
            )
            bad += 1
    return caught, bad


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("mutation-check", __doc__.splitlines()[0])
    parser.add_argument("--baseline", action="store_true", help="first run each test selection unmutated")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these mutations")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    known = {m.name: m for m in MUTATIONS}
    if args.list:
        for mutation in MUTATIONS:
            print(f"{mutation.name}: {mutation.figure}; {mutation.path}; {' '.join(mutation.tests)}; {mutation.why}")
        return 0
    unknown = sorted(set(args.only or ()) - set(known))
    if unknown:
        parser.error(f"unknown mutations {unknown}; known: {', '.join(known)}")
    selected = [known[name] for name in args.only] if args.only else list(MUTATIONS)
    with project_copy() as copy:
        caught, bad = check(selected, args.baseline, copy)
    skipped = len(selected) - caught - bad
    print(f"{caught} of {len(selected)} mutations caught, {bad} not, {skipped} not checkable on this machine")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
