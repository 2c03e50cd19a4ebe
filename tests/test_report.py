"""`python -m purerl.report` and the statistics behind it: rliable's numbers reproduced, the
run directories read, the report written, bad input refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from purerl import aggregate

REFERENCE = json.loads((Path(__file__).parent / "rliable_reference.json").read_text())


def _aggregates(scores):
    return np.stack([aggregate.mean(scores), aggregate.median(scores), aggregate.iqm(scores),
                     aggregate.optimality_gap(scores)], axis=-1)


def _compare(ours, theirs):
    points, intervals = ours
    assert list(points) == list(theirs["points"])
    for key, point in points.items():
        np.testing.assert_allclose(np.ravel(point), np.ravel(theirs["points"][key]),
                                   rtol=0, atol=1e-6)
        np.testing.assert_allclose(intervals[key].reshape(2, -1),
                                   np.reshape(theirs["intervals"][key], (2, -1)),
                                   rtol=0, atol=1e-6)


@pytest.fixture(params=[aggregate.CHUNK_ELEMENTS, 100], ids=["one-chunk", "many-chunks"])
def chunked(request, monkeypatch):
    """The resamples drawn in one chunk and in many: the same stream, the same numbers."""
    monkeypatch.setattr(aggregate, "CHUNK_ELEMENTS", request.param)


def test_aggregates_and_intervals_equal_rliables(chunked):
    """Mean, median, IQM and optimality gap with their 95% stratified bootstrap intervals, as
    tests/rliable_reference.py had rliable 1.2.0 compute them after `np.random.seed(7)`."""
    groups = {k: np.asarray(v) for k, v in REFERENCE["groups"].items()}
    ours = aggregate.interval_estimates(groups, _aggregates, reps=REFERENCE["reps"],
                                        seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["aggregates"])


def test_probability_of_improvement_equals_rliables(chunked):
    groups = {k: np.asarray(v) for k, v in REFERENCE["groups"].items()}
    pairs = {pair: tuple(groups[name] for name in pair.split(",")) for pair in REFERENCE["pairs"]}
    ours = aggregate.interval_estimates(pairs, aggregate.probability_of_improvement,
                                        reps=REFERENCE["reps"], seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["improvement"])
    assert ours[0]["better,baseline"] > 0.95


def test_performance_profiles_and_iqm_curves_equal_rliables(chunked):
    groups = {k: np.asarray(v) for k, v in REFERENCE["groups"].items()}
    taus = np.asarray(REFERENCE["taus"])
    ours = aggregate.interval_estimates(
        groups, lambda s: aggregate.score_distribution(s, taus), reps=REFERENCE["reps"],
        seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["profiles"])
    curves = {k: np.asarray(v) for k, v in REFERENCE["curves"].items()}  # [N, M, steps]
    ours = aggregate.interval_estimates(
        curves, lambda s: aggregate.iqm(np.moveaxis(s, -1, -3)), reps=REFERENCE["reps"],
        seed=REFERENCE["seed"])
    _compare(ours, REFERENCE["curves_iqm"])


def test_iqm_is_the_mean_of_the_middle_half():
    scores = np.array([[10.0], [1.0], [2.0], [3.0], [4.0], [-50.0], [5.0], [6.0]])
    assert aggregate.iqm(scores) == 3.5  # 2, 3, 4 and 5 of the eight
    assert aggregate.optimality_gap(np.array([[0.5], [2.0]])) == 0.25  # 2.0 counts as 1
