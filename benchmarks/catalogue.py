"""What the reports need from the registry, the config table and torch, recorded beside a machine's results.

The reports import no torch: they build the site where only results are. What they would otherwise ask the code
is written here by the bench, one JSON object per line in ``results/<machine>/catalogue.jsonl`` (asv reads only
``*.json`` there): a ``written`` header (commit, date, torch), each registered ``strategy`` (what the site
describes and the picks' tie-breaks read), each config's ``sizes`` per profile (``benchmarks.traffic``'s floors)
and each ``torch view`` check (does ``Tensor.unfold`` copy, does ``F.unfold`` return new memory?), run by the
bench's torch on a 2x3x5x5 float32 tensor.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.profiles import PROFILES
from benchmarks.records import write_records
from benchmarks.traffic import Sizes

if TYPE_CHECKING:
    import torch

    from impls import Strategy

CATALOGUE_FILE = "catalogue.jsonl"


def strategy_record(strategy: Strategy) -> dict:
    """One strategy as the reports see it."""
    return {
        "record": "strategy",
        "name": strategy.name,
        "description": strategy.description,
        "spatial_dims": list(strategy.spatial_dims),
        "devices": list(strategy.devices),
        "origin": strategy.origin or "",
        "reuses_output": strategy.reuses_output,
        "machinery": list(strategy.machinery),
        "advises_huge_pages": strategy.advises_huge_pages,
    }


def sizes_records() -> list[dict]:
    """Every config of the table at each profile's batch size (a run of a profile that covered more configs than
    it does now is read at the same size)."""
    from benchmarks.configs import configs

    return [
        {"record": "sizes", "profile": profile.name, "config": config.name, **dataclasses.asdict(Sizes.of(config))}
        for profile in PROFILES.values()
        for config in configs(batch_size=profile.batch_cap)
    ]


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def torch_view_records() -> list[dict]:
    """Whether each way of taking windows shares the input's storage and whether a write through its result
    changes the input."""
    import torch
    import torch.nn.functional as F

    def windows(x: torch.Tensor) -> torch.Tensor:
        return x.unfold(2, 3, 1).unfold(3, 3, 1)

    operations: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "x.unfold(2, 3, 1).unfold(3, 3, 1) (Tensor.unfold: the 3x3 windows)": windows,
        "x.unfold(2, 3, 1) (Tensor.unfold along one dimension)": lambda x: x.unfold(2, 3, 1),
        "the windows .permute(0, 1, 4, 5, 2, 3).reshape(2, 27, 9) (into F.unfold's layout)": (
            lambda x: windows(x).permute(0, 1, 4, 5, 2, 3).reshape(2, 27, 9)
        ),
        "F.unfold(x, kernel_size=3)": lambda x: F.unfold(x, kernel_size=3),
    }
    records = []
    for name, make in operations.items():
        x = torch.arange(2 * 3 * 5 * 5, dtype=torch.float32).reshape(2, 3, 5, 5)
        before = x.clone()
        out = make(x)
        shares = _storage(out) == _storage(x)
        out[(0,) * out.dim()] = -1.0  # one element, written through the result
        writes = not torch.equal(x, before)
        records.append({"record": "torch view", "operation": name, "shares": shares, "writes_through": writes})
    return records


def catalogue(strategies: Mapping[str, Strategy], commit: str | None) -> list[dict]:
    """The records of this checkout, ``strategies`` and this torch."""
    import torch

    header = {"record": "written", "commit": commit or "", "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    header["torch"] = torch.__version__
    return [
        header,
        *(strategy_record(s) for s in strategies.values()),
        *sizes_records(),
        *torch_view_records(),
    ]


def write_catalogue(machine_dir: Path, commit: str | None, strategies: Mapping[str, Strategy] | None = None) -> Path:
    """Write the catalogue of the registry (or ``strategies``) into ``machine_dir``; its path."""
    if strategies is None:
        from impls import STRATEGIES

        strategies = STRATEGIES
    return write_records(Path(machine_dir) / CATALOGUE_FILE, catalogue(strategies, commit))
