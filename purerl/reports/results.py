"""Finished runs as samples: the run directories at or under the paths given (Hydra's multirun
folders searched recursively), and each member of each run (a seed; a grid point's seed in a
sweep) one `Sample`, with its settings, its scores at the run's end and its curves, read from
`summary.json` and `metrics.jsonl`. What `python -m purerl.report` reads; no JAX.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from purerl.config import ConfigError, flat_settings
from purerl.logging.sinks import per_member_key
from purerl.reports.sweep import point_label

FINAL_RETURN = "final_return"  # summary.json's, per member: the last 5% of updates' episodes
EVAL_RETURN = "eval_return/"  # + temperature: the last evaluation's return, per member
FINISHED = ("completed", "stopped")  # the statuses whose runs are read; the others are skipped


@dataclass(frozen=True)
class Sample:
    """One member of a finished run.

    Attributes:
        run_dir: the run directory.
        member: the member's index in the run.
        env: the env's name (`env.name`).
        point: a sweep member's grid point in short (`lr=0.001`), "" without a sweep.
        settings: the run's settings by dotted key (`ppo.lr`); a sweep member's swept
            hyperparameters are its own values, under `ppo.<name>` and `sweep.<name>`.
        scores: per metric (`final_return`, `eval_return/<temperature>`), the member's value at
            the run's end, None where it completed no episode.
        curves: per metric, `(env_steps [P], values [P])` over the rows of metrics.jsonl that
            have it, NaN where the member completed no episode in that update.
    """

    run_dir: Path
    member: int
    env: str
    point: str
    settings: Dict[str, Any]
    scores: Dict[str, Optional[float]]
    curves: Dict[str, Tuple[np.ndarray, np.ndarray]]


def find_runs(paths: Sequence[Path]) -> List[Path]:
    """The run directories (those holding `summary.json`) at or under each of `paths`.

    Args:
        paths: run directories, or folders to search (a Hydra multirun directory).

    Returns:
        The run directories, sorted within each path, each once.

    Raises:
        ConfigError: a path does not exist or holds no run.
    """
    runs: List[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            raise ConfigError(f"no runs found in {path}: no such directory")
        found = sorted(summary.parent for summary in path.rglob("summary.json"))
        if not found:
            raise ConfigError(f"no runs found in {path} (a run directory holds summary.json)")
        runs += found
    return list(dict.fromkeys(runs))


def read_samples(paths: Sequence[Path]) -> Tuple[List[Sample], List[Tuple[Path, str]]]:
    """Every member of every finished run at or under `paths`.

    Args:
        paths: as `find_runs` takes them.

    Returns:
        `(samples, skipped)`: the members of the runs whose status is completed or stopped,
            and `(run_dir, status)` of the others (interrupted, preempted, nonfinite, invalid).

    Raises:
        ConfigError: as `find_runs`; or a run's files do not read.
    """
    samples, skipped = [], []
    for run_dir in find_runs(paths):
        summary = _read_json(run_dir / "summary.json")
        status = summary.get("status", "unknown")
        if status in FINISHED:
            samples += run_samples(run_dir, summary, _read_rows(run_dir / "metrics.jsonl"))
        else:
            skipped.append((run_dir, status))
    return samples, skipped


def run_samples(run_dir: Path, summary: Dict, rows: List[Dict]) -> List[Sample]:
    """The members of one finished run.

    Args:
        run_dir: the run directory.
        summary: its summary.json.
        rows: its metrics.jsonl rows.

    Returns:
        One `Sample` per member, in member order.

    Raises:
        ConfigError: the summary lacks the run's settings (an older purerl wrote it).
    """
    if "config" not in summary:
        raise ConfigError(f"{run_dir}/summary.json has no config: the run was written by an "
                          "older purerl; train it again to report on it")
    settings = flat_settings(summary["config"])
    finals = summary[f"{FINAL_RETURN}_per_seed"]
    points = [m["hparams"] for m in summary.get("members", [])] or [{}] * len(finals)
    metrics = [FINAL_RETURN] + sorted({EVAL_RETURN + k.split("/", 1)[1] for row in rows
                                       for k in row if k.startswith(per_member_key(EVAL_RETURN))})
    samples = []
    for member, (final, point) in enumerate(zip(finals, points)):
        own = {**settings, **{f"{group}.{name}": value for name, value in point.items()
                              for group in ("ppo", "sweep")}}
        curves = {metric: member_curve(rows, _row_key(metric), member) for metric in metrics}
        scores = {metric: _last(curves[metric][1]) for metric in metrics[1:]}
        label = point_label(point) if point else ""
        samples.append(Sample(run_dir, member, settings["env.name"], label, own,
                              {FINAL_RETURN: final, **scores}, curves))
    return samples


def member_curve(rows: List[Dict], key: str, member: int) -> Tuple[np.ndarray, np.ndarray]:
    """One member's values of a per-member key over the rows that have it.

    Args:
        rows: metrics.jsonl rows.
        key: a per-member key, e.g. `episode_return_per_member`.
        member: the member's index.

    Returns:
        `(env_steps [P], values [P])`, NaN where the member's value is None.
    """
    steps, values = [], []
    for row in rows:
        if key in row:
            value = row[key][member]
            steps.append(row["env_steps"])
            values.append(np.nan if value is None else value)
    return np.asarray(steps, dtype=float), np.asarray(values, dtype=float)


def _row_key(metric: str) -> str:
    """The per-member key of metrics.jsonl that a metric's curve is drawn from: the episodes'
    return for `final_return`, the evaluations' for `eval_return/<temperature>`."""
    return per_member_key("episode_return" if metric == FINAL_RETURN else metric)


def _last(values: np.ndarray) -> Optional[float]:
    return float(values[-1]) if values.size and np.isfinite(values[-1]) else None


def _read_json(path: Path) -> Dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None


def _read_rows(path: Path) -> List[Dict]:
    """metrics.jsonl's rows; none when the run wrote none."""
    if not path.exists():
        return []
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
