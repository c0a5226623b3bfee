"""A first correctness-and-timing table: every strategy on every config, at a small batch size.

Each cell is checked against the reference (values exactly, gradients within the summation bound) before
it is timed; a wrong strategy shows "WRONG" and no time. Times are medians from
``torch.utils.benchmark.Timer.blocked_autorange`` (which picks the number of calls per measurement and
reports the median over blocks), for the forward and for forward plus ``backward(grad_output)`` with a
fixed random ``grad_output``. This is a quick look; the asv harness is the suite's real measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils.benchmark as tbench

from benchmarks.configs import LayerConfig, configs
from impls import STRATEGIES, Strategy
from impls.parity import mismatch, random_grad_output


@dataclass
class Cell:
    strategy: str
    config: str
    status: str  # "ok", "skipped: <why>", "WRONG: <why>", "error: <why>"
    forward_ms: float | None = None
    forward_backward_ms: float | None = None


def _median_ms(stmt: str, env: dict, min_run_time: float) -> float:
    timer = tbench.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


def measure_cell(strategy: Strategy, config: LayerConfig, device: str, min_run_time: float) -> Cell:
    cell = Cell(strategy.name, config.name, "ok")
    reason = strategy.unsupported_reason(config.spatial_dims, device)
    if reason is not None:
        cell.status = f"skipped: {reason}"
        return cell
    try:
        x = config.make_input(device)
        kwargs = config.unfold_kwargs()
        problem = mismatch(strategy, x, kwargs)
        if problem is not None:
            cell.status = f"WRONG: {problem}"
            return cell
        leaf = x.detach().requires_grad_(True)
        env = {"f": strategy, "x": x, "leaf": leaf, "kw": kwargs, "g": random_grad_output(config.geometry, x)}
        cell.forward_ms = _median_ms("f(x, **kw)", env, min_run_time)
        cell.forward_backward_ms = _median_ms("f(leaf, **kw).backward(g); leaf.grad = None", env, min_run_time)
    except Exception as error:  # one failing cell (e.g. out of memory) must not stop the table
        cell.status = f"error: {type(error).__name__}: {error}"
    return cell


def run_table(batch_size: int, device: str = "cpu", min_run_time: float = 0.2, progress=print) -> list[Cell]:
    cells = []
    for config in configs(batch_size=batch_size):
        for strategy in STRATEGIES.values():
            cell = measure_cell(strategy, config, device, min_run_time)
            progress(f"  {config.name:<15} {strategy.name:<11} {cell.status}")
            cells.append(cell)
    return cells


def format_table(cells: list[Cell]) -> str:
    names = list(STRATEGIES)
    lines = [f"{'config':<15} " + " ".join(f"{n + ' fwd/fwd+bwd ms':>26}" for n in names)]
    for config in dict.fromkeys(c.config for c in cells):
        row = {c.strategy: c for c in cells if c.config == config}
        entries = []
        for name in names:
            c = row[name]
            if c.status == "ok":
                entries.append(f"{c.forward_ms:>12.3f} / {c.forward_backward_ms:>11.3f}")
            else:
                entries.append(f"{c.status.split(':')[0]:>26}")
        lines.append(f"{config:<15} " + " ".join(entries))
    return "\n".join(lines)
