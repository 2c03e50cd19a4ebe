"""A sweep's results on the host: its grid points (each of `num_seeds` members, all trained as
one vmapped batch in the program) per update in metrics.jsonl, and per member and grid point in
summary.json.

Member m is grid point m // num_seeds (`Config.sweep.grid()`) with seed m % num_seeds.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from purerl.config import Config
from purerl.logging.sinks import json_number, member_means


def is_sweep(config: Config) -> bool:
    """Whether `config` sweeps hyperparameters (`sweep.*` given).

    Args:
        config: the run's config.

    Returns:
        True when a `sweep.*` list is given.
    """
    return bool(config.sweep.swept())


def per_point_rows(return_sum: np.ndarray, count: np.ndarray, num_seeds: int) -> List[Dict]:
    """Each update's `episode_return_per_point`, pooled over the grid point's seeds, from
    `[M, K]` episode return sums and counts; None where no episode ended.

    Args:
        return_sum: summed episode returns `[M, K]` (K updates), M = grid points x num_seeds.
        count: episodes ended `[M, K]`.
        num_seeds: the seeds per grid point.

    Returns:
        K rows `{"episode_return_per_point": [G floats or None]}`, G grid points.
    """
    points = lambda x: x.reshape(len(x) // num_seeds, num_seeds, -1).sum(axis=1)  # noqa: E731
    return [{"episode_return_per_point": g}
            for g in member_means(points(return_sum), points(count))]


def point_label(point: Dict[str, float]) -> str:
    """A grid point in short, e.g. 'lr=0.001 ent_coef=0.01' ('all members' without a sweep).

    Args:
        point: `{name: value}`, as `SweepConfig.grid` gives it.

    Returns:
        The label.
    """
    return " ".join(f"{name}={value:g}" for name, value in point.items()) or "all members"


def point_labels(config: Config) -> List[str]:
    """Every grid point's `point_label`, in grid order.

    Args:
        config: the run's config.

    Returns:
        One label per grid point, `["all members"]` without a sweep.
    """
    return [point_label(point) for point in config.sweep.grid()]


def summary_sections(config: Config, finals: List[Optional[float]],
                     member_evals: Optional[Dict[str, List]],
                     evolved: Optional[Dict[str, List]] = None) -> Dict:
    """summary.json's `members`, `combinations` (best first by mean final return over the grid
    point's seeds; a point with no finished episode last) and `best` (the first of them).
    `finals` is each member's final return, `member_evals` each member's returns at the last
    evaluation by temperature, `evolved` (PBT) each member's hyperparameters now by name; the
    grid points are then where the members started.

    Args:
        config: the run's config.
        finals: `[M]`, each member's final return (`final_returns`), None where none ended.
        member_evals: `{temperature: [M] returns}` of the last evaluation, or None.
        evolved: `{name: [M] values}` of the evolving hyperparameters (PBT), or None.

    Returns:
        `{"members": [...], "combinations": [...], "best": {...}}`; each member's `hparams`
            (and `hparams_now` with `evolved`), `final_return` and `eval_return`; each
            combination's `hparams`, mean `final_return`, `final_return_per_seed` and
            `members`.
    """
    num_seeds = config.num_seeds
    members = []
    for m, final in enumerate(finals):
        evals = (None if member_evals is None
                 else {t: values[m] for t, values in member_evals.items()})
        members.append({"member": m, "seed": m % num_seeds,
                        "hparams": config.sweep.grid()[m // num_seeds],
                        "final_return": None if final is None else json_number(final),
                        "eval_return": evals})
        if evolved is not None:
            members[-1]["hparams_now"] = {name: values[m] for name, values in evolved.items()}
    combinations = []
    for g, point in enumerate(config.sweep.grid()):
        own = finals[g * num_seeds:(g + 1) * num_seeds]
        finite = [f for f in own if f is not None]
        combinations.append({
            "hparams": point,
            "final_return": json_number(float(np.mean(finite))) if finite else None,
            "final_return_per_seed": [None if f is None else json_number(f) for f in own],
            "members": list(range(g * num_seeds, (g + 1) * num_seeds)),
        })
    combinations.sort(key=lambda c: (c["final_return"] is None, -(c["final_return"] or 0.0)))
    return {"members": members, "combinations": combinations, "best": combinations[0]}
