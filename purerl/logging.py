"""Host-side sinks: `metrics.jsonl` lines, `summary.json`, and console progress lines."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from purerl.ppo import Metrics

# Metrics written to metrics.jsonl as means over seeds (the episode ones are pooled instead).
LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac",
             "explained_variance", "value_mean", "learning_rate", "opt_steps",
             "ent_coef", "clip_eps", "vf_coef", "gamma", "gae_lambda")


def _json_number(x: float):
    """A float at float32 precision (7 significant digits), an int when integral, None if not finite."""
    if not math.isfinite(x):
        return None
    return int(x) if float(x).is_integer() else float(f"{x:.7g}")


def metrics_rows(metrics: Metrics, first_update: int, batch_size: int) -> List[Dict]:
    """One dict per update from host metrics with leaves `[S, K]`; `first_update` is 1-based.

    episode_return / episode_length pool the episodes completed in the update over all seeds;
    they are None when no episode completed.
    """
    count = metrics.episode_count.sum(axis=0)
    returns = metrics.episode_return_sum.sum(axis=0) / np.maximum(count, 1)
    lengths = metrics.episode_length_sum.sum(axis=0) / np.maximum(count, 1)
    means = {key: getattr(metrics, key).mean(axis=0) for key in LOSS_KEYS}
    rows = []
    for i in range(count.shape[0]):
        update = first_update + i
        row = {
            "update": update,
            "env_steps": update * batch_size,
            "episode_return": float(returns[i]) if count[i] else None,
            "episode_length": float(lengths[i]) if count[i] else None,
        }
        row.update({key: _json_number(float(value[i])) for key, value in means.items()})
        rows.append(row)
    return rows


class MetricsLog:
    """Appends JSON lines to `<run_dir>/metrics.jsonl`, flushed after each chunk."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = self.path.open("a")

    def write(self, rows: List[Dict]) -> None:
        for row in rows:
            self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def final_returns(return_sums: np.ndarray, counts: np.ndarray) -> List[Optional[float]]:
    """Per seed, the mean return of the episodes completed in the last 5% of updates (at least
    the last update); `return_sums`, `counts` are `[S, num_updates]`. None where none ended."""
    window = max(1, math.ceil(0.05 * return_sums.shape[1]))
    sums, totals = return_sums[:, -window:].sum(axis=1), counts[:, -window:].sum(axis=1)
    return [float(s / c) if c else None for s, c in zip(sums, totals)]


def write_summary(run_dir: Path, summary: Dict) -> None:
    path = Path(run_dir) / "summary.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(path)


def progress_line(row: Dict, num_updates: int, sps: float) -> str:
    ret = row["episode_return"]
    ret_text = "   n/a" if ret is None else f"{ret:8.1f}"
    return (f"update {row['update']:>{len(str(num_updates))}}/{num_updates} | env steps "
            f"{row['env_steps']:>11,} | return {ret_text} | {sps:>10,.0f} steps/s")
