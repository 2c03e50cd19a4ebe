"""Where a run's metrics go: `metrics.jsonl` lines, `summary.json`, TensorBoard scalars and
Weights & Biases. tensorboardX and wandb are imported when a sink is made, not with this module."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

import numpy as np

from purerl.storage.write_errors import writing

if TYPE_CHECKING:  # not imported at run time: the command line's checks import this module
    from purerl.algos.algorithm import Metrics

# An algorithm's scalars (`Metrics.scalars`) are written as means over seeds (the episode ones
# are pooled instead), in this order: PPO's loss metrics, any other `loss/<name>` by name,
# PPO's other scalars, then any other by name.
PPO_LOSS_KEYS = tuple(f"loss/{name}" for name in
                      ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac"))
PPO_UPDATE_KEYS = ("explained_variance", "value_mean", "learning_rate", "opt_steps",
                   "ent_coef", "clip_eps", "vf_coef", "gamma", "gae_lambda")
# The names PPO's loss metrics had before they were `loss/<name>`, still written to
# metrics.jsonl beside the new ones; deprecated, to be dropped in the release after 0.3.0.
DEPRECATED_ALIASES = {key: key.removeprefix("loss/") for key in PPO_LOSS_KEYS}


def json_number(x: float):
    """A float at float32 precision (7 significant digits), an int when integral, None if not
    finite.

    Args:
        x: the value.

    Returns:
        An `int`, a `float` rounded to 7 significant digits, or None.
    """
    if not math.isfinite(x):
        return None
    return int(x) if float(x).is_integer() else float(f"{x:.7g}")


def is_number(value) -> bool:
    """An int/float (numpy scalars and bools included) that is finite.

    Args:
        value: any value.

    Returns:
        True for a finite number.
    """
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def metrics_rows(metrics: Metrics, first_update: int, batch_size: int) -> List[Dict]:
    """One dict per update from host metrics with leaves `[S, K]`.

    episode_return / episode_length pool the episodes completed in the update over all seeds;
    they are None when no episode completed. `episode_return_per_member` and
    `episode_length_per_member` are each seed's own (sweep members' in a sweep), None for a
    seed that completed none.

    Args:
      metrics: a chunk's `Metrics` on the host, leaves `[S, K]` (seeds, updates).
      first_update: the 1-based number of the chunk's first update.
      batch_size: env steps per update and seed.

    Returns:
      `K` dicts with `update`, `env_steps`, `episode_return`, `episode_length`, their `S`
        values per seed, the episodes' other statistics pooled as `episode_return` is
        (`Metrics.episode_outcome_sums`: `return/<agent>`, `won`), and the algorithm's scalars
        (means over seeds, `scalar_order`), each a `json_number`.
    """
    count = metrics.episode_count.sum(axis=0)
    returns = metrics.episode_return_sum.sum(axis=0) / np.maximum(count, 1)
    lengths = metrics.episode_length_sum.sum(axis=0) / np.maximum(count, 1)
    means = {key: metrics.scalars[key].mean(axis=0) for key in scalar_order(metrics.scalars)}
    outcomes = {key: total.sum(axis=0) / np.maximum(count, 1)
                for key, total in metrics.episode_outcome_sums.items()}
    member_returns = member_means(metrics.episode_return_sum, metrics.episode_count)
    member_lengths = member_means(metrics.episode_length_sum, metrics.episode_count)
    rows = []
    for i in range(count.shape[0]):
        update = first_update + i
        row = {
            "update": update,
            "env_steps": update * batch_size,
            "episode_return": json_number(float(returns[i])) if count[i] else None,
            "episode_length": json_number(float(lengths[i])) if count[i] else None,
            "episode_return_per_member": member_returns[i],
            "episode_length_per_member": member_lengths[i],
        }
        row.update({key: json_number(float(value[i])) if count[i] else None
                    for key, value in outcomes.items()})
        row.update({key: json_number(float(value[i])) for key, value in means.items()})
        rows.append(row)
    return rows


def scalar_order(keys) -> List[str]:
    """`keys` in the order a row holds them: `PPO_LOSS_KEYS`, other `loss/<name>` keys by name,
    `PPO_UPDATE_KEYS`, then the rest by name.

    Args:
        keys: a row's keys.

    Returns:
        The keys, sorted.
    """
    def rank(key):
        for group, known in enumerate((PPO_LOSS_KEYS, None, PPO_UPDATE_KEYS)):
            if known is None and key.startswith("loss/"):
                return group, 0, key
            if known is not None and key in known:
                return group, known.index(key), key
        return 3, 0, key

    return sorted(keys, key=rank)


def member_means(sums: np.ndarray, counts: np.ndarray) -> List[List[Optional[float]]]:
    """Per update, each member's mean over the episodes it completed.

    Args:
      sums: `[M, K]` episode totals (returns or lengths) of M members over K updates.
      counts: `[M, K]` episodes completed.

    Returns:
      `K` lists of `M` `json_number`s, None where a member completed no episode.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    return [[json_number(float(v)) if c else None for v, c in zip(column, totals)]
            for column, totals in zip(means.T, counts.T)]


def per_member_key(key: str) -> str:
    """The key of a metric's list of one value per member: `episode_return` ->
    `episode_return_per_member`, `eval_return/1.0` -> `eval_return_per_member/1.0`.

    Args:
        key: the metric's key.

    Returns:
        The key with `_per_member` after its first path component.
    """
    name, slash, rest = key.partition("/")
    return f"{name}_per_member{slash}{rest}"


def eval_key(temperature: float) -> str:
    """The metric key of the eval return at `temperature`: `eval_return/1.0`.

    Args:
        temperature: the sampling temperature.

    Returns:
        The key, the temperature spelt as a float.
    """
    return f"eval_return/{float(temperature)}"


class MetricsLog:
    """Appends JSON lines to `<run_dir>/metrics.jsonl`, flushed after each chunk."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "metrics.jsonl"
        with writing(self.path):
            self._file = self.path.open("a")

    def write(self, rows: List[Dict]) -> None:
        """Appends `rows` in one write (a process killed meanwhile cuts at most the last line),
        each with the `DEPRECATED_ALIASES` of the keys it has.

        Args:
            rows: the rows, in update order.

        Raises:
            purerl.storage.write_errors.WriteError: the write failed.
        """
        with writing(self.path):
            self._file.write("".join(json.dumps(with_aliases(row)) + "\n" for row in rows))
            self._file.flush()

    def close(self) -> None:
        """Closes metrics.jsonl; a failure raises `WriteError`."""
        with writing(self.path):
            self._file.close()


def with_aliases(row: Dict) -> Dict:
    """`row` with each `DEPRECATED_ALIASES` key it has written again under its old name.

    Args:
        row: a metrics row.

    Returns:
        A new dict: `row`'s keys, then the aliases.
    """
    return {**row, **{old: row[new] for new, old in DEPRECATED_ALIASES.items() if new in row}}


def keep_rows_until(path: Path, last_update: int) -> None:
    """Drops the lines of a JSON-lines file (metrics.jsonl, pbt.jsonl) after `last_update` (a
    resumed run rewrites them), and a last line cut short by a kill.

    Args:
      path: the file; nothing happens when it does not exist.
      last_update: the last `update` kept.
    """
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
    with writing(path):
        tmp.write_text("".join(line + "\n" for line in lines))
        tmp.replace(path)


def write_summary(run_dir: Path, summary: Dict) -> None:
    """Writes `summary` as indented JSON to `<run_dir>/summary.json`, atomically.

    Args:
      run_dir: the run directory.
      summary: a JSON-serializable dict.
    """
    path = Path(run_dir) / "summary.json"
    tmp = path.with_suffix(".json.tmp")
    with writing(path):
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
        tmp.replace(path)


def import_libraries(log_config) -> None:
    """Imports the libraries that the sinks of `log_config` (a `LogConfig`) and the plots
    write with, ahead of their first use: matplotlib, tensorboardX when `tensorboard`, wandb
    when `wandb`.

    Args:
        log_config: the `log` settings (`tensorboard`, `wandb`).
    """
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
        # tensorboardX (0.2 s): when the TensorBoard sink is made (or ahead, while compiling)
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog

        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # The file name has only a 1 s timestamp and is opened "wb": the suffix keeps a second
        # sink in the same directory (a resumed run) from truncating the first one's file.
        suffix = f".{os.getpid()}.{next(self._counter)}"
        with writing(self.run_dir):
            self._writer = EventsWriter(str(self.run_dir / "events"), filename_suffix=suffix)
        self.path = Path(getattr(self._writer, "_file_name", self.run_dir))
        if purge_step is not None:  # a resumed run: TensorBoard drops older files' later steps
            with writing(self.path):
                self._writer.write_event(Event(wall_time=time.time(), step=purge_step,
                                                session_log=SessionLog(status=SessionLog.START)))
                self._writer.flush()

    def write(self, rows: List[Dict]) -> None:
        """Writes each row's scalars as one event at step `row["env_steps"]`, then flushes.

        Args:
            rows: `metrics_rows`-style dicts, in update order.

        Raises:
            purerl.storage.write_errors.WriteError: the event file could not be written.
        """
        # tensorboardX (0.2 s): when the TensorBoard sink is made (or ahead, while compiling)
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        for row in rows:
            scalars = dict(row)
            for key, value in row.items():  # a sweep's grid points: one scalar each
                if key.endswith("_per_point"):
                    scalars.update({f"{key}/{i}": v for i, v in enumerate(value)})
            values = [Summary.Value(tag=key, simple_value=float(value))
                      for key, value in scalars.items()
                      if key not in self.SKIP_KEYS and is_number(value)]
            if values:
                with writing(self.path):
                    self._writer.write_event(Event(wall_time=time.time(),
                                                   step=int(row["env_steps"]),
                                                   summary=Summary(value=values)))
        with writing(self.path):
            self._writer.flush()

    def close(self) -> None:
        """Closes the event file; a failure raises `WriteError`."""
        with writing(self.path):
            self._writer.close()


class WandbSink:
    """Logs `metrics_rows`-style dicts to Weights & Biases (numbers only, step = env steps)."""

    def __init__(self, config, run_dir: Path):

        # wandb: optional (`pip install wandb`), when log.wandb is on
        import wandb

        self._wandb = wandb
        self._run = wandb.init(project=config.log.wandb_project, dir=str(run_dir),
                               config=dataclasses.asdict(config), name=Path(run_dir).name)

    def write(self, rows: List[Dict]) -> None:
        """Logs each row's finite numbers (lists skipped) and its `update` at step
        `row["env_steps"]`.

        Args:
            rows: `metrics_rows`-style dicts, in update order.
        """
        for row in rows:
            scalars = {k: v for k, v in row.items() if k not in ("update", "env_steps")
                       and is_number(v)}
            self._run.log({**scalars, "update": row["update"]}, step=int(row["env_steps"]))

    def close(self) -> None:
        """Finishes the W&B run."""
        self._run.finish()
