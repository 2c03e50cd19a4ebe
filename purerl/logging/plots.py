"""PNG plots of a run: the learning curve and a PBT run's hyperparameters. matplotlib is
imported when a plot is drawn, not with this module."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from purerl.logging.sinks import is_number
from purerl.write_errors import writing


def plot_learning_curve(path: Path, env_steps: np.ndarray, returns: np.ndarray,
                        evals: Dict[str, List[Tuple[int, float]]], title: str = "",
                        groups: Optional[List[str]] = None) -> None:
    """Writes a PNG of episode return against env steps to `path`, atomically.

    Each seed is a thin translucent line over its finite points, the nanmean over seeds a thick
    line. No pyplot: a `Figure` on an Agg canvas, so drawing touches no global matplotlib state.

    Args:
      path: the PNG file.
      env_steps: `[U]`, per seed, at the end of each update.
      returns: `[S, U]` (or `[U]`), NaN where a seed completed no episode in an update.
      evals: maps a temperature key ("1.0" or "eval_return/1.0") to `(env_steps, return)`
        pairs, drawn as markers.
      title: the axes' title, if any.
      groups: a sweep's grid point labels: the rows are consecutive groups of equally many
        seeds, and each group gets its own colour and mean line, labelled.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    x = np.asarray(env_steps, dtype=float).reshape(-1)
    y = np.atleast_2d(np.asarray(returns, dtype=float))
    num_seeds = y.shape[0]

    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    labels = groups or [None]
    size = num_seeds // len(labels)
    for g, group_label in enumerate(labels):
        _plot_seeds(ax, x, y[g * size:(g + 1) * size], f"C{g}", group_label)
    for i, (key, points) in enumerate(evals.items(), start=len(labels) - 1):
        pts = [(s, r) for s, r in points if r is not None and is_number(r)]
        if pts:
            steps, values = zip(*pts)
            ax.plot(steps, values, linestyle="none", marker="o", markersize=5, color=f"C{i + 1}",
                    label=f"eval T={str(key).rsplit('/', 1)[-1]}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")
    fig.tight_layout()
    _save_atomically(fig, path)


def plot_pbt(path: Path, rows: List[Dict], names: List[str], title: str = "") -> None:
    """Writes a PNG of each member's evolving hyperparameters over the run (one panel per
    name, a step line per member, log scale when all values are positive), atomically.

    Args:
      path: the PNG file.
      rows: pbt.jsonl's rows, each with `update` and `hparams` (name -> `[M]` values); nothing
        is written when empty.
      names: the hyperparameters to draw.
      title: the run's title, if any.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not rows:
        return
    fig = Figure(figsize=(4 * len(names), 3.5), dpi=100)
    FigureCanvasAgg(fig)
    updates = [row["update"] for row in rows]
    for i, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        values = np.array([row["hparams"][name] for row in rows], dtype=float)  # [G, M]
        for member in range(values.shape[1]):
            ax.step(updates, values[:, member], where="post", linewidth=1.0, alpha=0.7)
        ax.set(xlabel="update", ylabel=name, yscale="log" if (values > 0).all() else "linear")
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(f"{title}: hyperparameters after each PBT generation")
    fig.tight_layout()
    _save_atomically(fig, Path(path))


def _save_atomically(fig, path: Path) -> None:
    tmp = path.with_suffix(".tmp.png")
    try:
        with writing(path):
            fig.savefig(tmp, format="png")
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _plot_seeds(ax, x: np.ndarray, y: np.ndarray, color: str, label: Optional[str]) -> None:
    """Each seed's returns `y [S, U]` as a thin line and their mean (over the seeds that
    completed an episode) as a thick one, in `color`."""
    num_seeds = y.shape[0]
    finite = np.isfinite(y)
    if num_seeds > 1:
        for seed in range(num_seeds):
            ax.plot(x[finite[seed]], y[seed, finite[seed]], color=color, linewidth=0.8, alpha=0.3)
    any_finite = finite.any(axis=0)
    if any_finite.any():
        mean = np.where(finite, y, 0.0).sum(axis=0)[any_finite] / finite.sum(axis=0)[any_finite]
        label = label or (f"mean of {num_seeds} seeds" if num_seeds > 1 else "episode return")
        ax.plot(x[any_finite], mean, color=color, linewidth=2.0, label=label)
