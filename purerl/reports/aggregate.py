"""Aggregate scores over runs and tasks, with stratified bootstrap confidence intervals: the
definitions of rliable 1.2.0 (Agarwal et al., "Deep RL at the Edge of the Statistical
Precipice", NeurIPS 2021) in numpy, their draws included.

Scores are `[N, M]`: N runs (seeds, sweep members) of each of M tasks (environments), higher
is better. Every aggregate takes a leading axis of bootstrap replicates, `[R, N, M] -> [R]`,
so that a batch of resamples is one call. `interval_estimates` draws the resamples as
rliable's `get_interval_estimates` does after `np.random.seed(seed)`: one legacy `RandomState`
stream over the groups in order, each replicate `choice(N, size=scores.shape)` (every run index
drawn within its task), and the percentile interval of `np.percentile`. The same seed gives
rliable's numbers (`tests/test_report.py` compares them).
"""

from __future__ import annotations

from typing import Callable, Dict, Hashable, Iterator, Mapping, Sequence, Tuple, Union

import numpy as np

CHUNK_ELEMENTS = 1 << 22  # resampled scores held at once: about 32 MiB of float64
Scores = Union[np.ndarray, Sequence[np.ndarray]]  # one array, or a tuple resampled apart


def mean(scores: np.ndarray) -> np.ndarray:
    """The mean over tasks of each task's mean score (rliable's `aggregate_mean`).

    Args:
      scores: `[..., N, M]`.

    Returns:
      `[...]`.
    """
    return scores.mean(axis=-2).mean(axis=-1)


def median(scores: np.ndarray) -> np.ndarray:
    """The median over tasks of each task's mean score (rliable's `aggregate_median`).

    Args:
      scores: `[..., N, M]`.

    Returns:
      `[...]`.
    """
    return np.median(scores.mean(axis=-2), axis=-1)


def iqm(scores: np.ndarray) -> np.ndarray:
    """The interquartile mean of all runs and tasks: the mean of the scores left when the
    lowest and the highest `floor(N * M / 4)` are cut (rliable's `aggregate_iqm`, scipy's
    `trim_mean(scores, 0.25, axis=None)`).

    Args:
      scores: `[..., N, M]`.

    Returns:
      `[...]`.
    """
    flat = np.sort(scores.reshape(*scores.shape[:-2], -1), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut:flat.shape[-1] - cut].mean(axis=-1)


def optimality_gap(scores: np.ndarray, target: float = 1.0) -> np.ndarray:
    """How far the runs stay below `target` on average, scores above it counting as it
    (rliable's `aggregate_optimality_gap` with `gamma=target`): lower is better.

    Args:
      scores: `[..., N, M]`.
      target: the score that counts as solved (1 for normalized scores).

    Returns:
      `[...]`.
    """
    return target - np.minimum(scores, target).mean(axis=(-2, -1))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y): per task, the probability that a run of X scores above a run of Y, ties
    counting half (the Mann-Whitney U statistic over `N * K`), averaged over tasks (rliable's
    `probability_of_improvement`).

    Args:
      x: `[..., N, M]`, the runs of X.
      y: `[..., K, M]`, the runs of Y on the same tasks.

    Returns:
      `[...]`.
    """
    above = x[..., :, None, :] > y[..., None, :, :]
    ties = x[..., :, None, :] == y[..., None, :, :]
    return (above + 0.5 * ties).mean(axis=(-3, -2)).mean(axis=-1)


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """The performance profile: the fraction of all runs and tasks that score above each
    threshold (rliable's `score_distributions`).

    Args:
      scores: `[..., N, M]`.
      taus: `[T]` thresholds.

    Returns:
      `[..., T]`.
    """
    return (scores[..., None] > taus).mean(axis=(-3, -2))


def stratified_resamples(scores: np.ndarray, reps: int,
                         rng: np.random.RandomState) -> Iterator[np.ndarray]:
    """Bootstrap resamples of `scores`, in chunks: each replicate draws every entry's run
    anew, within its task (and within each later index: a curve's step), as rliable's
    `StratifiedBootstrap`.

    Args:
      scores: `[N, M, ...]`.
      reps: the replicates in all.
      rng: the stream; each replicate takes `rng.choice(N, size=scores.shape)`.

    Yields:
      `[r, N, M, ...]` arrays, r replicates each, `reps` in all.
    """
    chunk = max(1, CHUNK_ELEMENTS // scores.size)
    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        runs = rng.choice(scores.shape[0], size=(r, *scores.shape), replace=True)
        yield np.take_along_axis(np.broadcast_to(scores, (r, *scores.shape)), runs, axis=1)


def independent_resamples(arrays: Sequence[np.ndarray], reps: int,
                          rng: np.random.RandomState) -> Iterator[Tuple[np.ndarray, ...]]:
    """Bootstrap resamples of several score arrays, each resampled apart as in
    `stratified_resamples`, the arrays' draws taking turns within each replicate (rliable's
    `StratifiedIndependentBootstrap`).

    Args:
      arrays: `[N_i, M, ...]` each.
      reps: the replicates in all.
      rng: the stream.

    Yields:
      Tuples of `[r, N_i, M, ...]` arrays, `reps` replicates in all.
    """
    chunk = max(1, CHUNK_ELEMENTS // sum(a.size for a in arrays))
    alike = len({a.shape for a in arrays}) == 1  # then one draw per chunk is the same stream
    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        if alike:
            drawn = rng.choice(arrays[0].shape[0], size=(r, len(arrays), *arrays[0].shape))
            runs = [drawn[:, i] for i in range(len(arrays))]
        else:
            runs = [np.empty((r, *a.shape), dtype=np.int64) for a in arrays]
            for i in range(r):
                for a, out in zip(arrays, runs):
                    out[i] = rng.choice(a.shape[0], size=a.shape, replace=True)
        yield tuple(np.take_along_axis(np.broadcast_to(a, (r, *a.shape)), idx, axis=1)
                    for a, idx in zip(arrays, runs))


def interval_estimates(score_dict: Mapping[Hashable, Scores], func: Callable[..., np.ndarray],
                       reps: int = 50_000, size: float = 0.95, seed: int = 0
                       ) -> Tuple[Dict[Hashable, np.ndarray], Dict[Hashable, np.ndarray]]:
    """Point estimates and percentile bootstrap confidence intervals of `func` per group, as
    rliable's `get_interval_estimates(score_dict, func, reps=reps,
    confidence_interval_size=size)` computes them after `np.random.seed(seed)`.

    Args:
      score_dict: per group, scores `[N, M, ...]` (stratified bootstrap), or a tuple of such
        arrays (each resampled apart: `func(x, y)` of two groups).
      func: maps scores with a leading replicate axis, `[R, N, M, ...]` (one argument per
        array of a tuple), to `[R]` or `[R, P]`.
      reps: bootstrap replicates per group.
      size: the interval's coverage.
      seed: seeds one stream for all groups, taken in the dict's order.

    Returns:
      `(points, intervals)`: per group, `func` of the scores, `[]` or `[P]`, and its interval
        `[2, ...]` (lower, upper).
    """
    rng = np.random.RandomState(seed)
    alpha = 100 * (1 - size) / 2
    points, intervals = {}, {}
    for key, scores in score_dict.items():
        arrays = (scores,) if isinstance(scores, np.ndarray) else tuple(scores)
        points[key] = func(*(a[None] for a in arrays))[0]
        if len(arrays) == 1:
            chunks = ((a,) for a in stratified_resamples(arrays[0], reps, rng))
        else:
            chunks = independent_resamples(arrays, reps, rng)
        results = np.concatenate([func(*resampled) for resampled in chunks])
        intervals[key] = np.percentile(results, [alpha, 100 - alpha], axis=0)
    return points, intervals
