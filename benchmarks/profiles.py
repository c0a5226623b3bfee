"""Benchmark profiles: the same suite at the configs' real batch size (``full``) or scaled down (``quick``).

A profile is part of every benchmark's name (``unfold.Full.time_forward`` vs ``unfold.Quick.time_forward``),
so asv stores, compares and plots the two separately and they can never be mixed on one chart. Both are built
from one code path and differ only in ``Profile``'s fields: the batch cap, the configs (``config_names``,
``compile_time_configs``), asv's sampling and timeouts (``gate_timeout`` too) and the paired ratios' sampling (below).

How noise is kept in check (asv's sampling, see docs/methodology.md "Noise"): every cell runs in fresh processes
(``rounds``), each process first makes untimed warm-up calls for ``warmup_time`` seconds (at least one: a first
call touches its output and sets up what it does lazily),
then takes between ``repeat[0]`` and ``repeat[1]`` samples until ``repeat[2]`` seconds have passed. A sample is
one call (asv's ``number`` = 1, never asv's default of enough calls to fill 10 ms): asv re-runs the setup before
each sample, which drops the previous output, so no call allocates while its predecessor's output is alive.
asv reports the median over all rounds' samples and the interquartile range; ``asv compare`` and
``asv continuous`` judge differences with a Mann-Whitney U test on those samples.

The paired ratios (``benchmarks.ratios``) sample otherwise: ``ratio_processes`` replicate asv runs, one process
per cell in each, each over ``placements`` placements of the inputs, each of ``warmup_blocks`` untimed blocks (fewer
once they have taken ``placement_seconds``, at least one), then at most ``blocks`` blocks A B B A or
``placement_seconds`` of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.configs import LayerConfig, configs
from benchmarks.vocabulary import FULL_PROFILE, QUICK_PROFILE


@dataclass(frozen=True)
class Profile:
    """How large the problems are and how asv samples them."""

    name: str
    batch_cap: int | None  # None: each config's own batch size (256 for All-CNN-C)
    rounds: int  # separate processes per cell; their samples are pooled
    repeat: tuple[int, int, float]  # (min samples, max samples, seconds after which to stop sampling)
    number: int  # calls per sample (asv's ``number``); 1: setup, which drops the previous output, before each
    warmup_time: float  # > 0: seconds of untimed warm-up calls before sampling (asv makes at least one)
    timeout: float  # seconds one cell (one process) may take before asv fails it
    gate_timeout: float  # seconds the correctness gate of the whole profile may take
    ratio_processes: int = 3  # paired ratios (benchmarks.ratios): processes per cell, each in an asv run of its own
    placements: int = 2  # paired ratios (benchmarks.ratios): input placements per process
    blocks: int = 24  # paired ratios: at most this many blocks A B B A per placement ...
    placement_seconds: float = 0.1  # ... or this many seconds of them (at least 4 blocks)
    warmup_blocks: int = 6  # paired ratios: untimed blocks after each placement (its first blocks read high), or
    # fewer once they have taken placement_seconds (at least one): a slow call's first block has paid what they would
    config_names: tuple[str, ...] | None = None  # the configs benchmarked (None: every config in the table)
    compile_time_configs: tuple[str, ...] | None = None  # the configs whose cold compile is timed (None: all)

    @property
    def class_name(self) -> str:
        return self.name.capitalize()

    def configs(self) -> list[LayerConfig]:
        table = configs(batch_size=self.batch_cap)
        return table if self.config_names is None else [c for c in table if c.name in self.config_names]

    def compile_time_config_names(self) -> list[str]:
        names = [c.name for c in self.configs()]
        return names if self.compile_time_configs is None else [n for n in names if n in self.compile_time_configs]


# The quick profile is a look in a few minutes: one layer of each kind (unfoldNd's example; All-CNN-C's largest
# stride-1 and stride-2 layers; 1-d; 3-d; half precision) and one cold compile. The full profile has them all.
QUICK = Profile(
    QUICK_PROFILE,
    batch_cap=8,
    rounds=2,
    repeat=(3, 100, 0.2),
    number=1,
    warmup_time=0.1,
    timeout=60,
    gate_timeout=300,
    # chosen with unfold-bench stability's forecast (reports.forecast) on the Intel Xeon VM and measured there at
    # this count: docs/stability-quick-intel.txt, whose forecast says what fewer would give; docs/stability-quick.txt
    # measures it on the AMD EPYC VM and forecasts what other counts would give there
    ratio_processes=7,
    placements=2,
    blocks=16,
    placement_seconds=0.05,
    config_names=("example", "allcnnc-conv2", "allcnnc-conv3", "seq1d-conv", "vol3d-conv", "conv4-bfloat16"),
    compile_time_configs=("allcnnc-conv2",),
)
FULL = Profile(
    FULL_PROFILE,
    batch_cap=None,
    rounds=2,
    repeat=(2, 10, 0.5),
    number=1,
    warmup_time=0.1,
    timeout=300,
    gate_timeout=1200,
    # measured at this count on one config (docs/stability-full-conv3.txt, whose forecast says what more would give);
    # each replicate times every config again (benchmarks.runner.plan)
    ratio_processes=3,
    placements=1,
    blocks=8,
    placement_seconds=0.25,
)


class SampledByProfile:
    """Base of an asv suite class: a subclass that names its ``profile`` gets asv's sampling attributes from it
    (``rounds``, ``repeat``, ``number``, ``warmup_time``, ``timeout``), so no suite restates them."""

    profile: Profile

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        profile = cls.__dict__.get("profile")
        if profile is not None:
            cls.rounds, cls.repeat, cls.number = profile.rounds, profile.repeat, profile.number
            cls.warmup_time, cls.timeout = profile.warmup_time, profile.timeout


PROFILES: dict[str, Profile] = {p.name: p for p in (QUICK, FULL)}
DEFAULT_PROFILE = QUICK.name  # what every command runs when none is named (the Makefile's PROFILE too)
# The cells the regression gate judges on a pull request (GATE_BENCH in .github/workflows/regress.yml and
# regress-gpu.yml, checked by tests/test_ci_files.py) and that validate-gate measures it on: a regex over asv's
# cell names
CI_SUBSET = "allcnnc-conv2|allcnnc-conv3"


def get_profile(name: str) -> Profile:
    """The profile called ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}") from None


SUITES = (
    "unfold",
    "ratios",
    "floors",
    "direct_floors",
    "bounds",
    "compile_time",
)  # the asv modules in benchmarks/ that hold profile classes


def benchmark_regex(profile: Profile, narrow: str = "", suites: tuple[str, ...] = SUITES) -> str:
    """One asv ``-b`` regex for ``profile``'s benchmarks in ``suites``, narrowed by ``narrow`` (a regex) if given.

    asv ORs several ``-b`` options and matches each against ``name(param, ...)``, so the profile and the
    narrowing must be one expression: ``narrow`` may name a config, strategy or device.
    """
    unknown = set(suites) - set(SUITES)
    if not suites or unknown:
        raise ValueError(f"suites={suites!r}: each must be one of {SUITES}")
    return rf"^(?:{'|'.join(suites)})\.{profile.class_name}\..*(?:{narrow})"
