"""Writes tests/rliable_reference.json: rliable's own numbers for fixed synthetic scores, which
tests/test_report.py compares `purerl.reports.aggregate` with (to 1e-6, the same seed).

rliable is not a dependency of purerl: run this from a venv that has it. rliable 1.2.0 imports
only beside pandas < 3 (its `arch` 7.2's `deprecate_kwarg` fails with pandas 3):

    python3.11 -m venv ../rliable-venv
    ../rliable-venv/bin/pip install rliable==1.2.0 "pandas<3"
    ../rliable-venv/bin/python tests/rliable_reference.py

The committed file came from rliable 1.2.0, arch 7.2.0, pandas 2.3.3, numpy 2.4.6 and scipy
1.17.1 on Python 3.11.
"""

import json
from pathlib import Path

import numpy as np
from rliable import library as rly, metrics

SEED = 7
REPS = 2000
TAUS = np.linspace(0.0, 1.0, 11)


def synthetic_scores():
    """Fixed groups `[N, M]` (runs, tasks), ties included, and curves `[N, M, F]`."""
    rs = np.random.RandomState(0)
    groups = {
        "better": rs.normal(0.8, 0.05, size=(8, 1)),  # clearly better than "baseline"
        "baseline": rs.normal(0.3, 0.1, size=(8, 1)),
        "tasks": np.round(rs.uniform(0.0, 1.2, size=(5, 3)), 1),  # ties, scores above 1
        "tasks_more_runs": np.round(rs.uniform(0.0, 1.2, size=(7, 3)), 1),
        "three_runs": rs.normal(0.5, 0.2, size=(3, 2)),
    }
    curves = {"rising": np.cumsum(rs.uniform(0.0, 0.2, size=(6, 2, 5)), axis=-1),
              "flat": rs.uniform(0.2, 0.4, size=(4, 2, 5))}
    return groups, curves


def aggregates(scores):
    return np.array([metrics.aggregate_mean(scores), metrics.aggregate_median(scores),
                     metrics.aggregate_iqm(scores), metrics.aggregate_optimality_gap(scores)])


def iqm_per_step(scores):
    return np.array([metrics.aggregate_iqm(scores[..., t]) for t in range(scores.shape[-1])])


def listed(estimates):
    return {key: np.asarray(value).tolist() for key, value in estimates.items()}


def main():
    groups, curves = synthetic_scores()
    pairs = {"better,baseline": [groups["better"], groups["baseline"]],
             "baseline,better": [groups["baseline"], groups["better"]],
             "tasks,tasks_more_runs": [groups["tasks"], groups["tasks_more_runs"]]}
    out = {"seed": SEED, "reps": REPS, "taus": TAUS.tolist(),
           "groups": listed(groups), "curves": listed(curves), "pairs": list(pairs)}
    np.random.seed(SEED)
    points, intervals = rly.get_interval_estimates(groups, aggregates, reps=REPS)
    out["aggregates"] = {"points": listed(points), "intervals": listed(intervals)}
    np.random.seed(SEED)
    points, intervals = rly.get_interval_estimates(pairs, metrics.probability_of_improvement,
                                                   reps=REPS)
    out["improvement"] = {"points": listed(points), "intervals": listed(intervals)}
    np.random.seed(SEED)
    profiles, intervals = rly.create_performance_profile(groups, TAUS, reps=REPS)
    out["profiles"] = {"points": listed(profiles), "intervals": listed(intervals)}
    np.random.seed(SEED)
    points, intervals = rly.get_interval_estimates(curves, iqm_per_step, reps=REPS)
    out["curves_iqm"] = {"points": listed(points), "intervals": listed(intervals)}
    path = Path(__file__).with_name("rliable_reference.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
