"""What the host keeps of a run between chunks: per-seed episode totals of every update, the
eval results, and the final returns computed from them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import numpy as np

if TYPE_CHECKING:  # not imported at run time: the command line's checks import this module
    from purerl.algos.algorithm import Metrics


class RunHistory:
    """What the host keeps of a run: per-seed episode totals of every update `[S, U]` and the
    eval results, for summary.json, learning_curve.png and resuming (it is saved in the
    checkpoints' record)."""

    def __init__(self, num_seeds: int):
        empty = np.zeros((num_seeds, 0))
        self.return_sum, self.length_sum, self.count = empty, empty, empty
        # the episodes' other statistics by name (`Metrics.episode_outcome_sums`), `[S, U]`
        self.outcome_sums: Dict[str, np.ndarray] = {}
        self.evals: List[Dict] = []  # {"update", "env_steps", "returns": {"1.0": ...}}

    @property
    def num_updates(self) -> int:
        """The updates `U` held so far."""
        return self.count.shape[1]

    def extend(self, metrics: Metrics) -> None:
        """Appends host metrics with leaves `[S, K]`.

        Args:
            metrics: a chunk's `Metrics` on the host: `episode_return_sum`, `episode_length_sum`,
                `episode_count` and `episode_outcome_sums` `[S, K]` (K updates).
        """
        self.outcome_sums = {
            name: np.concatenate([self.outcome_sums.get(name, np.zeros_like(self.count)), total],
                                 1) for name, total in metrics.episode_outcome_sums.items()}
        self.return_sum = np.concatenate([self.return_sum, metrics.episode_return_sum], 1)
        self.length_sum = np.concatenate([self.length_sum, metrics.episode_length_sum], 1)
        self.count = np.concatenate([self.count, metrics.episode_count], 1)

    def returns(self) -> np.ndarray:
        """Mean episode return per seed and update `[S, U]`, NaN where none completed.

        Returns:
            float64 `[S, U]`.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.return_sum / self.count, np.nan)

    def outcomes(self) -> Dict[str, np.ndarray]:
        """The episodes' other statistics' means per seed and update, as `returns` gives the
        return's.

        Returns:
            `{name: float64 [S, U]}`, NaN where no episode completed.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            return {name: np.where(self.count > 0, total / self.count, np.nan)
                    for name, total in self.outcome_sums.items()}

    def latest_return(self) -> Optional[float]:
        """The mean return of the episodes completed in the latest update in which any ended,
        pooled over the members as metrics.jsonl's `episode_return` is; None before the first.

        Returns:
            The mean return, or None.
        """
        counts = self.count.sum(axis=0)
        ended = np.flatnonzero(counts)
        if not ended.size:
            return None
        return float(self.return_sum[:, ended[-1]].sum() / counts[ended[-1]])

    def final_returns(self) -> List[Optional[float]]:
        """`final_returns` of this history: one per seed.

        Returns:
            `S` floats, None where no episode ended.
        """
        return final_returns(self.return_sum, self.count)

    def final_outcomes(self) -> Dict[str, List[Optional[float]]]:
        """The episodes' other statistics (a multi-agent env's `return/<agent>`, `won`) as
        `final_returns` computes the return: per name, one per seed.

        Returns:
            `{name: S floats, None where no episode ended}`.
        """
        return {name: final_returns(total, self.count)
                for name, total in self.outcome_sums.items()}

    def best_eval(self) -> Optional[float]:
        """The best eval return at the first temperature so far.

        Returns:
            The largest mean return at the first temperature, None before the first eval.
        """
        values = [next(iter(e["returns"].values())) for e in self.evals]
        return max(values) if values else None

    def eval_points(self) -> Dict[str, List[Tuple[int, float]]]:
        """Per temperature key ("1.0"), the `(env_steps, return)` of each eval so far.

        Returns:
            `{temperature: [(env_steps, return), ...]}` in eval order.
        """
        points: Dict[str, List[Tuple[int, float]]] = {}
        for e in self.evals:
            for temperature, value in e["returns"].items():
                points.setdefault(temperature, []).append((e["env_steps"], value))
        return points

    def to_record(self) -> Dict:
        """The history as JSON-serializable lists, for a checkpoint's record.

        Returns:
            `{"return_sum", "length_sum", "count"}` as nested lists `[S][U]`, `evals`, and
                `outcome_sums` by name.
        """
        return {"return_sum": self.return_sum.tolist(), "length_sum": self.length_sum.tolist(),
                "count": self.count.tolist(), "evals": self.evals,
                "outcome_sums": {name: total.tolist()
                                 for name, total in self.outcome_sums.items()}}

    @classmethod
    def from_record(cls, record: Dict) -> "RunHistory":
        """The history that `to_record` wrote.

        Args:
            record: `to_record`'s dict.

        Returns:
            The `RunHistory`, sums and counts float64 `[S, U]`.
        """
        history = cls(len(record["count"]))
        history.return_sum, history.length_sum, history.count = (
            np.asarray(record[k], np.float64).reshape(len(record["count"]), -1)
            for k in ("return_sum", "length_sum", "count"))
        history.evals = list(record["evals"])
        history.outcome_sums = {  # absent from the records of runs without outcomes
            name: np.asarray(total, np.float64).reshape(history.count.shape)
            for name, total in record.get("outcome_sums", {}).items()}
        return history


def final_returns(return_sums: np.ndarray, counts: np.ndarray) -> List[Optional[float]]:
    """Per seed, the mean return of the episodes completed in the last 5% of updates (at least
    the last update; stretched back to the last update in which an episode ended, for episodes
    longer than that window).

    Args:
      return_sums: summed episode returns `[S, num_updates]`.
      counts: completed episodes `[S, num_updates]`.

    Returns:
      `S` floats, None where no episode ended at all.
    """
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
