"""Host-side sinks: `metrics.jsonl` lines, `summary.json`, console progress lines and bar,
TensorBoard scalars, and learning-curve plots."""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, TextIO, Tuple

import numpy as np

if TYPE_CHECKING:  # not imported at run time: the command line's checks import this module
    from purerl.ppo import Metrics

# Metrics written to metrics.jsonl as means over seeds (the episode ones are pooled instead).
LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac",
             "explained_variance", "value_mean", "learning_rate", "opt_steps",
             "ent_coef", "clip_eps", "vf_coef", "gamma", "gae_lambda")


def json_number(x: float):
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
            "episode_return": json_number(float(returns[i])) if count[i] else None,
            "episode_length": json_number(float(lengths[i])) if count[i] else None,
        }
        row.update({key: json_number(float(value[i])) for key, value in means.items()})
        rows.append(row)
    return rows


class MetricsLog:
    """Appends JSON lines to `<run_dir>/metrics.jsonl`, flushed after each chunk."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = self.path.open("a")

    def write(self, rows: List[Dict]) -> None:
        """Appends `rows` in one write (a process killed meanwhile cuts at most the last line)."""
        self._file.write("".join(json.dumps(row) + "\n" for row in rows))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def keep_rows_until(path: Path, last_update: int) -> None:
    """Drops the lines of a JSON-lines file (metrics.jsonl, pbt.jsonl) after `last_update` (a
    resumed run rewrites them), and a last line cut short by a kill."""
    path = Path(path)
    if not path.exists():
        return
    lines = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["update"] <= last_update:
                lines.append(line)
        except (ValueError, KeyError):
            break
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(path)


def eval_key(temperature: float) -> str:
    """The metric key of the eval return at `temperature`: `eval_return/1.0`."""
    return f"eval_return/{float(temperature)}"


class RunHistory:
    """What the host keeps of a run: per-seed episode totals of every update `[S, U]` and the
    eval results, for summary.json, learning_curve.png and resuming (it is saved in the
    checkpoints' record)."""

    def __init__(self, num_seeds: int):
        empty = np.zeros((num_seeds, 0))
        self.return_sum, self.length_sum, self.count = empty, empty, empty
        self.evals: List[Dict] = []  # {"update", "env_steps", "returns": {"1.0": ...}}

    @property
    def num_updates(self) -> int:
        return self.count.shape[1]

    def extend(self, metrics: Metrics) -> None:
        """Appends host metrics with leaves `[S, K]`."""
        self.return_sum = np.concatenate([self.return_sum, metrics.episode_return_sum], 1)
        self.length_sum = np.concatenate([self.length_sum, metrics.episode_length_sum], 1)
        self.count = np.concatenate([self.count, metrics.episode_count], 1)

    def returns(self) -> np.ndarray:
        """Mean episode return per seed and update `[S, U]`, NaN where none completed."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.return_sum / self.count, np.nan)

    def final_returns(self) -> List[Optional[float]]:
        return final_returns(self.return_sum, self.count)

    def best_eval(self) -> Optional[float]:
        """The best eval return at the first temperature so far."""
        values = [next(iter(e["returns"].values())) for e in self.evals]
        return max(values) if values else None

    def eval_points(self) -> Dict[str, List[Tuple[int, float]]]:
        points: Dict[str, List[Tuple[int, float]]] = {}
        for e in self.evals:
            for temperature, value in e["returns"].items():
                points.setdefault(temperature, []).append((e["env_steps"], value))
        return points

    def to_record(self) -> Dict:
        return {"return_sum": self.return_sum.tolist(), "length_sum": self.length_sum.tolist(),
                "count": self.count.tolist(), "evals": self.evals}

    @classmethod
    def from_record(cls, record: Dict) -> "RunHistory":
        history = cls(len(record["count"]))
        history.return_sum, history.length_sum, history.count = (
            np.asarray(record[k], np.float64).reshape(len(record["count"]), -1)
            for k in ("return_sum", "length_sum", "count"))
        history.evals = list(record["evals"])
        return history


def final_returns(return_sums: np.ndarray, counts: np.ndarray) -> List[Optional[float]]:
    """Per seed, the mean return of the episodes completed in the last 5% of updates (at least
    the last update; stretched back to the last update in which an episode ended, for episodes
    longer than that window); `return_sums`, `counts` are `[S, num_updates]`. None where no
    episode ended at all."""
    window = max(1, math.ceil(0.05 * return_sums.shape[1]))
    finals = []
    for sums, totals in zip(return_sums, counts):
        ended = np.flatnonzero(totals)
        if not ended.size:
            finals.append(None)
            continue
        start = min(len(totals) - window, int(ended[-1]))
        finals.append(float(sums[start:].sum() / totals[start:].sum()))
    return finals


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


def _is_number(value) -> bool:
    """An int/float (numpy scalars and bools included) that is finite."""
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def import_libraries(log_config) -> None:
    """Imports the libraries that the sinks of `log_config` (a `LogConfig`) and the plots
    write with, ahead of their first use: matplotlib, tensorboardX when `tensorboard`, wandb
    when `wandb`."""
    names = ["matplotlib.figure", "matplotlib.backends.backend_agg"]
    names += ["tensorboardX.event_file_writer"] if log_config.tensorboard else []
    names += ["wandb"] if log_config.wandb else []
    for name in names:
        importlib.import_module(name)


class TensorBoardSink:
    """Writes `metrics_rows`-style dicts as TensorBoard scalars into `run_dir` itself.

    One scalar per numeric key (tag = the key, e.g. `episode_return`, `eval_return/1.0`) at
    step = row["env_steps"], and one per entry of a sweep's `*_per_point` lists
    (`episode_return_per_point/0`, ...); None, non-finite, strings and other lists are skipped,
    and so are `update` and `env_steps`. The file is on disk when `write` returns: tensorboardX's
    `SummaryWriter` queues events to a background thread that its `flush` does not wait for,
    so this uses tensorboardX's synchronous `EventsWriter` (the same file format) instead.
    """

    SKIP_KEYS = ("update", "env_steps")
    _counter = itertools.count()

    def __init__(self, run_dir: Path, purge_step: Optional[int] = None):
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog

        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # The file name has only a 1 s timestamp and is opened "wb": the suffix keeps a second
        # sink in the same directory (a resumed run) from truncating the first one's file.
        suffix = f".{os.getpid()}.{next(self._counter)}"
        self._writer = EventsWriter(str(self.run_dir / "events"), filename_suffix=suffix)
        if purge_step is not None:  # a resumed run: TensorBoard drops older files' later steps
            self._writer.write_event(Event(wall_time=time.time(), step=purge_step,
                                            session_log=SessionLog(status=SessionLog.START)))
            self._writer.flush()

    def write(self, rows: List[Dict]) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        for row in rows:
            scalars = dict(row)
            for key, value in row.items():  # a sweep's grid points: one scalar each
                if key.endswith("_per_point"):
                    scalars.update({f"{key}/{i}": v for i, v in enumerate(value)})
            values = [Summary.Value(tag=key, simple_value=float(value))
                      for key, value in scalars.items()
                      if key not in self.SKIP_KEYS and _is_number(value)]
            if values:
                self._writer.write_event(Event(wall_time=time.time(), step=int(row["env_steps"]),
                                               summary=Summary(value=values)))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def plot_learning_curve(path: Path, env_steps: np.ndarray, returns: np.ndarray,
                        evals: Dict[str, List[Tuple[int, float]]], title: str = "",
                        groups: Optional[List[str]] = None) -> None:
    """Writes a PNG of episode return against env steps to `path`, atomically.

    `env_steps` is `[U]` (per seed, at the end of each update); `returns` is `[S, U]` (or `[U]`)
    with NaN where a seed completed no episode in an update. Each seed is a thin translucent line
    over its finite points, the nanmean over seeds a thick line; `evals` maps a temperature key
    ("1.0" or "eval_return/1.0") to `(env_steps, return)` pairs drawn as markers. With `groups`
    (a sweep's grid point labels), the rows are consecutive groups of equally many seeds, and
    each group gets its own colour and mean line, labelled. No pyplot: a
    `Figure` on an Agg canvas, so importing this module touches no global matplotlib state.
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
        pts = [(s, r) for s, r in points if r is not None and _is_number(r)]
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
    name, a step line per member, log scale) from pbt.jsonl's `rows`, atomically."""
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


def _si(x: float) -> str:
    """12345 -> "12.3k", 1.5e6 -> "1.50M" (three significant digits)."""
    for unit in ("", "k", "M", "G"):
        if abs(x) < 999.5:
            return f"{x:.3g}{unit}" if abs(x) < 1 or unit else f"{x:.0f}"
        x /= 1000.0
    return f"{x:.3g}T"


class ProgressBar:
    """A tqdm bar over env steps (per seed) to `file` (stderr), or nothing when not `enabled`.

    `initial` is the resumed position, so the rate and ETA count only the steps of this run.
    """

    def __init__(self, total_steps: int, enabled: bool = True, initial: int = 0,
                 file: Optional[TextIO] = None):
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=int(total_steps), initial=int(initial), unit="steps",
                             unit_scale=True, dynamic_ncols=True, mininterval=1.0,
                             bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}"
                                        "{postfix}]",
                             file=sys.stderr if file is None else file)

    @property
    def position(self) -> Optional[int]:
        """The bar's current env steps; None when disabled."""
        return None if self._bar is None else int(self._bar.n)

    def update(self, env_steps: int, sps: float, latest_return: Optional[float]) -> None:
        """Moves the bar to `env_steps` (absolute) with a postfix of `sps` and the latest return."""
        if self._bar is None:
            return
        ret = "n/a" if latest_return is None else f"{latest_return:.1f}"
        self._bar.set_postfix_str(f"{_si(sps)} steps/s, return {ret}", refresh=False)
        self._bar.update(int(env_steps) - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class WandbSink:
    """Logs `metrics_rows`-style dicts to Weights & Biases (numbers only, step = env steps)."""

    def __init__(self, config, run_dir: Path):
        import dataclasses

        import wandb

        self._wandb = wandb
        self._run = wandb.init(project=config.log.wandb_project, dir=str(run_dir),
                               config=dataclasses.asdict(config), name=Path(run_dir).name)

    def write(self, rows: List[Dict]) -> None:
        for row in rows:
            scalars = {k: v for k, v in row.items() if k not in ("update", "env_steps")
                       and _is_number(v)}
            self._run.log({**scalars, "update": row["update"]}, step=int(row["env_steps"]))

    def close(self) -> None:
        self._run.finish()
