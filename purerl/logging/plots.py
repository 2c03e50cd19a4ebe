"""PNG plots: a run's learning curve and a PBT run's hyperparameters; a report's performance
profiles and sample-efficiency curves. matplotlib is imported when a plot is drawn, not with
this module."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from purerl.logging.sinks import is_number
from purerl.storage.write_errors import writing

SMOOTHING_POINTS = 20  # a curve's smoothing window is its length over this, at least 1 point
TITLE_CHARS_PER_INCH = 9  # a title wraps at about this many characters per inch of figure
EVAL_MARKERS = "osD^v"  # per temperature, in order; the first filled, the others hollow


def smoothing_window(length: int) -> int:
    """The window `smooth` averages over for a curve of `length` points: a twentieth of it.

    Args:
      length: the number of points (updates).

    Returns:
      The window in points, at least 1.
    """
    return max(1, length // SMOOTHING_POINTS)


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """A trailing moving average over the last axis that skips NaN.

    Point `u` is the mean of the finite values among `y[..., u - window + 1 : u + 1]` (fewer at
    the start), NaN when there are none.

    Args:
      y: `[..., U]`, NaN where a point has no value.
      window: the points averaged, at least 1.

    Returns:
      `[..., U]` float array.
    """
    y = np.asarray(y, dtype=float)
    finite = np.isfinite(y)
    pad = np.zeros(y.shape[:-1] + (window,))
    totals = np.cumsum(np.concatenate([pad, np.where(finite, y, 0.0)], axis=-1), axis=-1)
    counts = np.cumsum(np.concatenate([pad, finite], axis=-1), axis=-1)
    total = totals[..., window:] - totals[..., :-window]
    count = counts[..., window:] - counts[..., :-window]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def seed_mean(y: np.ndarray) -> np.ndarray:
    """The mean over seeds of the seeds that have a value, NaN where none has.

    Args:
      y: `[S, U]`, NaN where a seed completed no episode in an update.

    Returns:
      `[U]`.
    """
    finite = np.isfinite(y)
    count = finite.sum(axis=0)
    return np.where(count > 0, np.where(finite, y, 0.0).sum(axis=0) / np.maximum(count, 1),
                    np.nan)


def wrap_title(title: str, width_inches: float) -> str:
    """`title` broken into lines that fit a figure `width_inches` wide.

    Args:
        title: the title.
        width_inches: the figure's width.

    Returns:
        The title, lines joined by newlines.
    """
    return textwrap.fill(title, max(20, int(width_inches * TITLE_CHARS_PER_INCH)))


def plot_learning_curve(path: Path, env_steps: np.ndarray, returns: np.ndarray,
                        evals: Dict[str, List[Tuple[int, float]]], title: str = "",
                        groups: Optional[List[str]] = None) -> None:
    """Writes `learning_curve_figure(...)` as a PNG to `path`, atomically.

    Args:
        path: the PNG's path.
        env_steps: `[U]`, per seed, at the end of each update.
        returns: `[S, U]` (or `[U]`), NaN where a seed completed no episode.
        evals: `{temperature: [(env_steps, return), ...]}`, drawn as markers.
        title: the figure's title.
        groups: a sweep's grid point labels, one per group of rows.

    Raises:
        purerl.storage.write_errors.WriteError: the file could not be written.
    """
    save_png(learning_curve_figure(env_steps, returns, evals, title, groups), Path(path))


def learning_curve_figure(env_steps: np.ndarray, returns: np.ndarray,
                          evals: Dict[str, List[Tuple[int, float]]], title: str = "",
                          groups: Optional[List[str]] = None):
    """A figure of episode return against env steps.

    Per group of seeds: the mean over seeds per update as a faint line, that mean smoothed
    (`smooth` over `smoothing_window(U)` updates) as a thick one, and with several seeds a band
    from the lowest to the highest smoothed seed. Evaluations are black markers, one shape per
    temperature (the first filled, the others hollow and larger, so equal values stay
    visible). The legend is right of the axes. No pyplot: a bare `Figure`, so drawing touches
    no global matplotlib state.

    Args:
      env_steps: `[U]`, per seed, at the end of each update.
      returns: `[S, U]` (or `[U]`), NaN where a seed completed no episode in an update.
      evals: maps a temperature key ("1.0" or "eval_return/1.0") to `(env_steps, return)`
        pairs, drawn as markers.
      title: the figure's title, if any; wrapped to fit.
      groups: a sweep's grid point labels: the rows are consecutive groups of equally many
        seeds, and each group gets its own colour and lines, labelled.

    Returns:
      The `matplotlib.figure.Figure`.
    """
    # matplotlib (0.35 s): when a plot is drawn, not with this module
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import EngFormatter

    x = np.asarray(env_steps, dtype=float).reshape(-1)
    y = np.atleast_2d(np.asarray(returns, dtype=float))
    window = smoothing_window(x.size)
    smoothed = f"mean over {window} updates"
    labels = groups or [smoothed]
    size = y.shape[0] // len(labels)

    fig = Figure(figsize=(9, 4.5), dpi=100, layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    for g, label in enumerate(labels):
        plot_seeds(ax, x, y[g * size:(g + 1) * size], window, f"C{g}", label)
    keys = ([Line2D([], [], color="black", linewidth=2.0, label=smoothed)] if groups else [])
    keys.append(Line2D([], [], color="black", linewidth=0.8, alpha=0.4, label="per update"))
    if size > 1:
        keys.append(Patch(color="black", alpha=0.15, linewidth=0, label="seeds' range"))
    curves, _ = ax.get_legend_handles_labels()
    _plot_evals(ax, evals)
    markers = ax.get_legend_handles_labels()[0][len(curves):]
    ax.set(xlabel="env steps", ylabel="episode return")
    ax.xaxis.set_major_formatter(EngFormatter())
    ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(wrap_title(title, fig.get_figwidth()))
    ax.legend(handles=curves + keys + markers, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              borderaxespad=0, fontsize="small")
    return fig


def plot_pbt(path: Path, rows: List[Dict], names: List[str], title: str = "") -> None:
    """Writes `pbt_figure(...)` as a PNG to `path`, atomically; nothing when `rows` is empty.

    Args:
        path: the PNG's path.
        rows: pbt.jsonl's rows (`generation_row`).
        names: the evolving hyperparameters, one panel each.
        title: the figure's title.

    Raises:
        purerl.storage.write_errors.WriteError: the file could not be written.
    """
    if rows:
        save_png(pbt_figure(rows, names, title), Path(path))


def outcomes_figure(env_steps: np.ndarray, outcomes: Dict[str, np.ndarray], title: str = ""):
    """A figure of a multi-agent run's episode statistics besides the team's return (each
    agent's `return/<agent>`, SMAX's `won`) against env steps: one panel per statistic, drawn
    as `learning_curve_figure` draws the return (`plot_seeds`).

    Args:
        env_steps: `[U]`, per seed, at the end of each update.
        outcomes: `{name: [S, U]}`, NaN where a seed completed no episode in an update.
        title: the figure's title, if any.

    Returns:
        The `matplotlib.figure.Figure`.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    x = np.asarray(env_steps, dtype=float).reshape(-1)
    window = smoothing_window(x.size)
    columns = min(len(outcomes), 3)
    rows = -(-len(outcomes) // columns)
    fig = Figure(figsize=(4 * columns, 3 * rows + 0.5), dpi=100, layout="constrained")
    for i, (name, values) in enumerate(outcomes.items()):
        ax = fig.add_subplot(rows, columns, i + 1)
        plot_seeds(ax, x, np.atleast_2d(np.asarray(values, dtype=float)), window, f"C{i}",
                   None)
        ax.set(xlabel="env steps", title=name)
        ax.xaxis.set_major_formatter(EngFormatter())
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(wrap_title(f"{title} (mean over {window} updates thick)",
                                fig.get_figwidth()))
    return fig


def pbt_figure(rows: List[Dict], names: List[str], title: str = ""):
    """A figure of each member's evolving hyperparameters over the run: one panel per name,
    a step line per member labelled by its index (the values are the curve), thinner for later
    members so that members on the same value show as nested lines, log scale when all values
    are positive; the legend right of the panels.

    Args:
      rows: pbt.jsonl's rows (at least one), each with `update` and `hparams` (name -> `[M]`
        values).
      names: the hyperparameters to draw.
      title: the run's title, if any; the figure's title is wrapped to fit.

    Returns:
      The `matplotlib.figure.Figure`.
    """
    # matplotlib (0.35 s): when a plot is drawn, not with this module
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.5 * len(names) + 2, 3.8), dpi=100, layout="constrained")
    updates = [row["update"] for row in rows]
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        values = np.array([row["hparams"][name] for row in rows], dtype=float)  # [G, M]
        widths = np.linspace(3.5, 1.0, values.shape[1])  # members on equal values show nested
        for member, width in enumerate(widths):
            ax.step(updates, values[:, member], where="post", linewidth=width,
                    label=f"member {member}")
        ax.set(xlabel="update", ylabel=name, yscale="log" if (values > 0).all() else "linear")
        ax.grid(True, alpha=0.3)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
                    fontsize="small", ncols=-(-values.shape[1] // 16))
    heading = "PBT members' hyperparameters"
    fig.suptitle(wrap_title(f"{title}: {heading}" if title else heading, fig.get_figwidth()))
    return fig


def profiles_figure(taus: np.ndarray, profiles: Dict[str, Tuple[np.ndarray, np.ndarray]],
                    xlabel: str, title: str = ""):
    """A figure of performance profiles: per group, the fraction of its runs that score above
    each threshold, as a line, with its confidence interval shaded; the legend right of the
    axes.

    Args:
      taus: `[T]` thresholds.
      profiles: per group label, `(fractions [T], interval [2, T])`.
      xlabel: what the thresholds are (the score's name).
      title: the figure's title, if any; wrapped to fit.

    Returns:
      The `matplotlib.figure.Figure`.
    """
    return _bands_figure({label: (taus, *profile) for label, profile in profiles.items()},
                         xlabel, "fraction of runs with score > threshold", title)


def sample_efficiency_figure(curves: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]],
                             ylabel: str, title: str = ""):
    """A figure of sample-efficiency curves: per group, a score against env steps as a line,
    with its confidence interval shaded; the legend right of the axes.

    Args:
      curves: per group label, `(env_steps [F], scores [F], interval [2, F])`.
      ylabel: what the score is (e.g. "IQM of episode return").
      title: the figure's title, if any; wrapped to fit.

    Returns:
      The `matplotlib.figure.Figure`.
    """
    # matplotlib (0.35 s): when a plot is drawn, not with this module
    from matplotlib.ticker import EngFormatter

    fig = _bands_figure(curves, "env steps", ylabel, title)
    fig.axes[0].xaxis.set_major_formatter(EngFormatter())
    return fig


def _bands_figure(lines: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]], xlabel: str,
                  ylabel: str, title: str):
    """One line per label, `(x [P], y [P], interval [2, P])`, its interval shaded in its
    colour."""
    # matplotlib (0.35 s): when a plot is drawn, not with this module
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4.5), dpi=100, layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    for g, (label, (x, y, interval)) in enumerate(lines.items()):
        ax.plot(x, y, color=f"C{g}", linewidth=2.0, label=label)
        ax.fill_between(x, interval[0], interval[1], color=f"C{g}", alpha=0.2, linewidth=0)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(wrap_title(title, fig.get_figwidth()))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize="small")
    return fig


def save_png(fig, path: Path) -> None:
    """Writes `fig` as a PNG to `path`, atomically (a temporary file, then renamed).

    Args:
        fig: a matplotlib `Figure`.
        path: the PNG's path.

    Raises:
        purerl.storage.write_errors.WriteError: the file could not be written.
    """
    tmp = path.with_suffix(".tmp.png")
    try:
        with writing(path):
            fig.savefig(tmp, format="png")
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def plot_seeds(ax, x: np.ndarray, y: np.ndarray, window: int, color: str,
               label: Optional[str]) -> None:
    """Draws seeds' returns on `ax` in `color`: their mean per point faint, that mean smoothed
    (`smooth` over `window` points) thick and labelled `label`, and with several seeds a band
    between the lowest and the highest smoothed seed.

    Args:
      ax: a matplotlib `Axes`.
      x: `[U]` env steps.
      y: `[S, U]` returns, NaN where a seed has none.
      window: the smoothing window in points.
      color: a matplotlib colour.
      label: the thick line's legend label.
    """
    mean = seed_mean(y)
    finite = np.isfinite(mean)
    ax.plot(x[finite], mean[finite], color=color, linewidth=0.8, alpha=0.4)
    ax.plot(x[finite], smooth(mean, window)[finite], color=color, linewidth=2.0, label=label)
    if y.shape[0] > 1:
        per_seed = smooth(y, window)  # fmin/fmax skip NaN: all-NaN columns stay NaN
        ax.fill_between(x, np.fmin.reduce(per_seed, axis=0), np.fmax.reduce(per_seed, axis=0),
                        where=finite, color=color, alpha=0.15, linewidth=0)


def _plot_evals(ax, evals: Dict[str, List[Tuple[int, float]]]) -> None:
    """Each temperature's evaluations as black markers of its own shape."""
    for i, (key, points) in enumerate(evals.items()):
        pts = [(s, r) for s, r in points if r is not None and is_number(r)]
        if not pts:
            continue
        steps, values = zip(*pts)
        ax.plot(steps, values, linestyle="none", marker=EVAL_MARKERS[i % len(EVAL_MARKERS)],
                markersize=5 + 3 * i, color="black", markerfacecolor="black" if i == 0 else "none",
                markeredgewidth=1.3, zorder=3, label=f"eval T={str(key).rsplit('/', 1)[-1]}")
