"""Benchmark profiles: the same suite at the configs' real batch size (``full``) or scaled down (``quick``).

A profile is part of every benchmark's name (``unfold.Full.time_forward`` vs ``unfold.Quick.time_forward``),
so asv stores, compares and plots the two separately and they can never be mixed on one chart. Both are
built from one code path; only the batch cap and asv's sampling attributes differ.

How noise is kept in check (asv's sampling, see README "Noise"): every cell runs in fresh processes
(``rounds``), each process first makes one untimed warm-up call (asv's ``warmup_time`` runs at least one),
then takes between ``repeat[0]`` and ``repeat[1]`` samples of one call each until ``repeat[2]`` seconds have
passed. asv reports the median over all rounds' samples and the interquartile range; ``asv compare`` and
``asv continuous`` judge differences with a Mann-Whitney U test on those samples.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.configs import LayerConfig, configs


@dataclass(frozen=True)
class Profile:
    """How large the problems are and how asv samples them."""

    name: str
    batch_cap: int | None  # None: each config's own batch size (256 for All-CNN-C)
    rounds: int  # separate processes per cell; their samples are pooled
    repeat: tuple[int, int, float]  # (min samples, max samples, seconds after which to stop sampling)
    warmup_time: float  # > 0: seconds of untimed warm-up calls before sampling (asv makes at least one)
    timeout: float  # seconds one cell (one process) may take before asv fails it
    gate_timeout: float  # seconds the correctness gate of the whole profile may take

    @property
    def class_name(self) -> str:
        return self.name.capitalize()

    def configs(self) -> list[LayerConfig]:
        return configs(batch_size=self.batch_cap)


QUICK = Profile("quick", batch_cap=8, rounds=1, repeat=(2, 5, 0.5), warmup_time=0.05, timeout=60, gate_timeout=300)
FULL = Profile("full", batch_cap=None, rounds=2, repeat=(2, 5, 8.0), warmup_time=0.01, timeout=300, gate_timeout=1200)

PROFILES: dict[str, Profile] = {p.name: p for p in (QUICK, FULL)}


def get_profile(name: str) -> Profile:
    """The profile called ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}") from None


SUITES = ("unfold", "bounds", "compile_time")  # the asv modules in benchmarks/ that hold profile classes


def benchmark_regex(profile: Profile, narrow: str = "", suites: tuple[str, ...] = SUITES) -> str:
    """One asv ``-b`` regex for ``profile``'s benchmarks in ``suites``, narrowed by ``narrow`` (a regex) if given.

    asv ORs several ``-b`` options and matches each against ``name(param, ...)``, so the profile and the
    narrowing must be one expression: ``narrow`` may name a config, strategy or device.
    """
    unknown = set(suites) - set(SUITES)
    if not suites or unknown:
        raise ValueError(f"suites={suites!r}: each must be one of {SUITES}")
    return rf"^(?:{'|'.join(suites)})\.{profile.class_name}\..*(?:{narrow})"
