"""A report's numbers: finished runs' samples grouped into score matrices (`group_samples`),
normalized by score ranges (`score_ranges`), and per group rliable's aggregates, probabilities
of improvement, performance profiles and IQM curves, each with its stratified bootstrap
interval (`purerl.reports.aggregate`). What `python -m purerl.report` writes; no JAX, no files
written.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from purerl.config import ConfigError, config_dir
from purerl.logging.plots import smooth, smoothing_window
from purerl.reports import aggregate
from purerl.reports.results import FINAL_RETURN, Sample

CURVE_POINTS = 50  # env-step points of a sample-efficiency curve
PROFILE_POINTS = 101  # thresholds of a performance profile
TIE_MARGIN = 0.1  # every score tied: thresholds span the tie +- this fraction of it (>= 0.1)
CURVE_REPS = 2000  # replicates of the profiles' and curves' bands (rliable's profile default)
SIZE = 0.95  # the intervals' coverage
AGGREGATES = ("mean", "median", "iqm", "optimality_gap")


@dataclasses.dataclass
class Group:
    """One group's samples as a score matrix.

    Attributes:
        label: how the report names it (`ppo.lr=0.001`, a run's path).
        envs: the envs, the matrix's columns, sorted.
        scores: `[N, M]`: N runs of each of the M envs, normalized when the report is.
        samples: `[N][M]`, the sample behind each score.
    """

    label: str
    envs: List[str]
    scores: np.ndarray
    samples: List[List[Sample]]


def score_ranges(normalize: str, envs: List[str]) -> Optional[Dict[str, Dict[str, float]]]:
    """The `{env: {"random": R, "target": T}}` that returns are normalized by, None for raw
    returns.

    Args:
        normalize: auto, presets, none, or a YAML file of ranges.
        envs: the envs of the runs.

    Returns:
        The ranges of `envs`, or None (`normalize` none, or auto with one env).

    Raises:
        ConfigError: raw returns of several envs; an env without a range; a bad file.
    """
    if normalize == "auto":
        normalize = "presets" if len(envs) > 1 else "none"
    if normalize == "none":
        if len(envs) > 1:
            raise ConfigError(f"the runs are of {len(envs)} envs ({', '.join(envs)}) and "
                              "normalize=none: returns of different envs do not compare; "
                              "normalize=presets divides each by its env's range")
        return None
    path = config_dir() / "score_ranges.yaml" if normalize == "presets" else Path(normalize)
    table = _read_ranges(path)
    for env in envs:
        entry = table.get(env)
        if not isinstance(entry, dict) or not {"random", "target"} <= set(entry):
            raise ConfigError(f"normalize={normalize}: {path} has no score range (random and "
                              f"target) of {env}; give normalize=<file.yaml> with a line "
                              f"`{env}: {{random: R, target: T}}`")
        if not entry["target"] > entry["random"]:
            raise ConfigError(f"{path}: {env}'s target {entry['target']} is not above its "
                              f"random return {entry['random']}")
    return {env: {"random": float(table[env]["random"]), "target": float(table[env]["target"])}
            for env in envs}


def _read_ranges(path: Path) -> Dict:
    # omegaconf (50 ms of the report's start-up): when scores are normalized
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not path.is_file():
        raise ConfigError(f"normalize={path}: no such file")
    try:
        return OmegaConf.to_container(OmegaConf.load(path))
    except (OmegaConfBaseException, ValueError) as error:
        raise ConfigError(f"cannot read {path}: {str(error).splitlines()[0]}") from None


def group_samples(samples: List[Sample], group_by: str, metric: str,
                  ranges: Optional[Dict[str, Dict[str, float]]]) -> List[Group]:
    """The samples grouped, as score matrices.

    Args:
        samples: every sample read.
        group_by: "run" (each run directory and grid point), "all" (one group), or a dotted
            setting.
        metric: the score taken of each sample.
        ranges: per env `{"random", "target"}` to normalize by, or None.

    Returns:
        The groups: by run in the runs' order, by a setting in the order of its values.

    Raises:
        ConfigError: a sample without the metric; a group with fewer than 2 runs of an env,
            or with unequal numbers of runs of its envs.
    """
    labels = _labels(samples, group_by)
    groups = []
    for label in dict.fromkeys(labels[s.run_dir, s.member] for s in samples):
        members = [s for s in samples if labels[s.run_dir, s.member] == label]
        envs = sorted({s.env for s in members})
        columns = [[s for s in members if s.env == env] for env in envs]
        runs = {env: len(column) for env, column in zip(envs, columns)}
        if min(runs.values()) < 2:
            env = min(runs, key=runs.get)
            raise ConfigError(
                f"group {label!r} has 1 run of {env} ({columns[envs.index(env)][0].run_dir}): "
                "a confidence interval needs at least 2; train more seeds (num_seeds=N) or "
                "group_by a setting that pools runs")
        if len(set(runs.values())) > 1:
            counts = ", ".join(f"{n} of {env}" for env, n in runs.items())
            raise ConfigError(f"group {label!r} has {counts} runs: the stratified bootstrap "
                              "needs as many runs of each env")
        scores = np.array([[_score(s, metric, ranges) for s in row] for row in zip(*columns)])
        groups.append(Group(label, envs, scores, [list(row) for row in zip(*columns)]))
    if group_by not in ("run", "all"):  # by the setting's value, numbers numerically
        groups.sort(key=lambda g: _value_order(g.samples[0][0].settings.get(group_by)))
    return groups


def _labels(samples: List[Sample], group_by: str) -> Dict[Tuple[Path, int], str]:
    """Each sample's group label, by `(run_dir, member)`: `ppo.lr=0.001`; by run, the run's
    path below the runs' common folder (a single run's as given) and its grid point."""
    if group_by == "all":
        return {(s.run_dir, s.member): "all" for s in samples}
    if group_by != "run":
        return {(s.run_dir, s.member): f"{group_by}={_format(s.settings.get(group_by))}"
                for s in samples}
    runs = list(dict.fromkeys(s.run_dir for s in samples))
    root = os.path.commonpath([r.resolve() for r in runs])
    names = {r: os.path.relpath(r.resolve(), root) if len(runs) > 1 else str(r) for r in runs}
    return {(s.run_dir, s.member): " ".join(filter(None, (names[s.run_dir], s.point)))
            for s in samples}


def _value_order(value) -> Tuple:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return (0, value, "") if number else (1, 0, str(value))


def _format(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _score(sample: Sample, metric: str, ranges: Optional[Dict]) -> float:
    if metric not in sample.scores:
        have = ", ".join(sample.scores)
        raise ConfigError(f"metric={metric}: {sample.run_dir} has no such metric (it has "
                          f"{have})")
    value = sample.scores[metric]
    if value is None:
        raise ConfigError(f"{sample.run_dir}: member {sample.member} has no {metric} (no "
                          "episode ended)")
    return normalized(value, ranges[sample.env]) if ranges else value


def normalized(value, score_range: Dict[str, float]):
    """`(value - random) / (target - random)`: 0 at a uniform-random policy's return, 1 at
    the target.

    Args:
        value: a return, a float or an array of any shape.
        score_range: the env's `{"random": R, "target": T}`.

    Returns:
        The normalized score, `value`'s shape.
    """
    return (value - score_range["random"]) / (score_range["target"] - score_range["random"])


def raw_target(env: str) -> Optional[float]:
    """The optimality gap's target for raw returns.

    Args:
        env: the runs' env.

    Returns:
        The env's target in conf/score_ranges.yaml, None when it has none.
    """
    entry = _read_ranges(config_dir() / "score_ranges.yaml").get(env)
    return float(entry["target"]) if isinstance(entry, dict) and "target" in entry else None


def aggregates(groups: List[Group], target: Optional[float], reps: int, seed: int) -> List[Dict]:
    """Per group, each aggregate's point estimate and interval.

    Args:
        groups: the groups.
        target: the optimality gap's target; None: no optimality gap.
        reps: bootstrap replicates of each interval.
        seed: the bootstrap's seed.

    Returns:
        report.json's `groups`: per group its label, envs, runs and scores, and per aggregate
            (`AGGREGATES`) `{"point", "interval"}`.
    """
    names = AGGREGATES if target is not None else AGGREGATES[:-1]

    def func(scores):
        values = [aggregate.mean(scores), aggregate.median(scores), aggregate.iqm(scores)]
        if target is not None:
            values.append(aggregate.optimality_gap(scores, target))
        return np.stack(values, axis=-1)

    points, intervals = aggregate.interval_estimates(
        {g.label: g.scores for g in groups}, func, reps=reps, size=SIZE, seed=seed)
    return [{"label": g.label, "envs": g.envs, "runs_per_env": g.scores.shape[0],
             "runs": sorted({str(s.run_dir) for row in g.samples for s in row}),
             "scores": g.scores.tolist(),
             **{name: {"point": float(points[g.label][i]),
                       "interval": intervals[g.label][:, i].tolist()}
                for i, name in enumerate(names)}}
            for g in groups]


def improvements(groups: List[Group], reps: int, seed: int) -> List[Dict]:
    """P(X > Y) with its interval for each pair of groups on the same envs, both ways (the
    reverse is 1 - P, its interval mirrored).

    Args:
        groups: the groups.
        reps: bootstrap replicates of each interval.
        seed: the bootstrap's seed.

    Returns:
        report.json's `improvement`: rows `{"x", "y", "point", "interval"}`.
    """
    pairs = {(x.label, y.label): (x.scores, y.scores)
             for x, y in itertools.combinations(groups, 2) if x.envs == y.envs}
    points, intervals = aggregate.interval_estimates(
        pairs, aggregate.probability_of_improvement, reps=reps, size=SIZE, seed=seed)
    rows = []
    for x, y in pairs:
        point, (low, high) = float(points[x, y]), intervals[x, y].tolist()
        rows.append({"x": x, "y": y, "point": point, "interval": [low, high]})
        rows.append({"x": y, "y": x, "point": 1 - point, "interval": [1 - high, 1 - low]})
    return rows


def profiles(groups: List[Group], seed: int) -> Dict:
    """Each group's performance profile with its interval: the fraction of its runs that score
    above each of `PROFILE_POINTS` thresholds (`thresholds`).

    Args:
        groups: the groups.
        seed: the bootstrap's seed.

    Returns:
        report.json's `profiles`: `taus` `[T]`, and per group `fraction` `[T]` and `interval`
            `[2, T]`.
    """
    taus = thresholds(np.concatenate([g.scores.ravel() for g in groups]))
    points, intervals = aggregate.interval_estimates(
        {g.label: g.scores for g in groups}, lambda s: aggregate.score_distribution(s, taus),
        reps=CURVE_REPS, size=SIZE, seed=seed)
    return {"taus": taus.tolist(),
            "groups": {k: {"fraction": points[k].tolist(), "interval": intervals[k].tolist()}
                       for k in points}}


def thresholds(scores: np.ndarray) -> np.ndarray:
    """A performance profile's thresholds: evenly spaced from the lowest score to the highest.
    When every score ties, they span the tie and `TIE_MARGIN` of it either side (at least
    `TIE_MARGIN`), so that the profile shows its step from 1 (below the tie) to 0 (at and
    above it), as rliable's profiles over a fixed range of thresholds do.

    Args:
        scores: `[K]` every score of every group.

    Returns:
        `[PROFILE_POINTS]` thresholds, ascending.
    """
    low, high = scores.min(), scores.max()
    if low == high:
        margin = TIE_MARGIN * max(abs(low), 1.0)
        low, high = low - margin, high + margin
    return np.linspace(low, high, PROFILE_POINTS)


def curves(groups: List[Group], metric: str, ranges: Optional[Dict], seed: int) -> Dict:
    """Each group's IQM against env steps with its interval; a group whose runs share no
    stretch of env steps has none. Episode returns per update are each run's moving mean over
    a twentieth of its updates first (as learning_curve.png's thick line); evaluations are
    taken as they are.

    Args:
        groups: the groups.
        metric: the score's metric, whose curve each sample has.
        ranges: per env `{"random", "target"}` to normalize by, or None.
        seed: the bootstrap's seed.

    Returns:
        report.json's `curves`: per group that has one, `env_steps` `[F]`, `iqm` `[F]` and
            `interval` `[2, F]`.
    """
    def own(sample):
        x, y = sample.curves[metric]
        return (x, smooth(y, smoothing_window(y.size))) if metric == FINAL_RETURN else (x, y)

    grids = {}
    for g in groups:
        grid, values = common_curve([[own(s) for s in row] for row in g.samples])
        if grid is None:
            continue
        if ranges:
            values = np.stack([normalized(values[:, m], ranges[env])
                               for m, env in enumerate(g.envs)], axis=1)
        grids[g.label] = (grid, values)
    points, intervals = aggregate.interval_estimates(
        {k: v for k, (_, v) in grids.items()},
        lambda s: aggregate.iqm(np.moveaxis(s, -1, -3)), reps=CURVE_REPS, size=SIZE, seed=seed)
    return {k: {"env_steps": grids[k][0].tolist(), "iqm": points[k].tolist(),
                "interval": intervals[k].tolist()} for k in grids}


def common_curve(curves: List[List[Tuple[np.ndarray, np.ndarray]]]
                 ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Samples' curves on `CURVE_POINTS` common env steps: each sample's latest value at or
    before each step (an update without a finished episode keeps the one before), over the
    stretch where every sample has one.

    Args:
        curves: `[N][M]` `(env_steps [P], values [P])`, NaN where a sample has no value.

    Returns:
        `(env_steps [F], values [N, M, F])`, or `(None, None)` when the samples share no
            stretch of env steps.
    """
    finite = [[(x[np.isfinite(y)], y[np.isfinite(y)]) for x, y in row] for row in curves]
    if any(x.size == 0 for row in finite for x, _ in row):
        return None, None
    start = max(x[0] for row in finite for x, _ in row)
    end = min(x[-1] for row in finite for x, _ in row)
    if start >= end:
        return None, None
    grid = np.linspace(start, end, CURVE_POINTS)
    values = np.array([[y[np.searchsorted(x, grid, side="right") - 1] for x, y in row]
                       for row in finite])
    return grid, values
