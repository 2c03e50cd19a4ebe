"""Population-based training inside the program: exploit and explore on the members' axis."""

import json

import jax
import numpy as np
import pytest
from conftest import resume_from_checkpoint, run_cli, tiny_config

from purerl.config import ConfigError
from purerl.parallel.pbt import generation_fitness, make_pbt_step
from purerl.parallel.program import make_program
from purerl.validation import validate


def test_the_worst_copy_the_best_and_perturb_what_they_copied():
    config = tiny_config(num_seeds=2, **{"sweep.lr": [1e-3, 1e-4, 1e-5, 1e-6], "pbt.every": 2,
                                         "pbt.fraction": 0.25, "pbt.perturb": [0.5, 2.0]})
    state = jax.jit(make_program(config).init)(jax.random.key(0))
    fitness = np.float32([5, 1, 7, 8, -np.inf, 2, 6, 3])  # worst: 4, 1; best: 3, 2
    new, source = jax.jit(make_pbt_step(config))(state, fitness, jax.random.key(1))
    source = np.asarray(source)
    assert set(np.flatnonzero(source != np.arange(8))) == {1, 4}
    assert set(source[[1, 4]]) <= {2, 3}
    old_lr, new_lr = np.asarray(state.hparams.lr), np.asarray(new.hparams.lr)
    for m in range(8):
        leaves = zip(jax.tree.leaves(new.params), jax.tree.leaves(state.params))
        assert all(np.array_equal(a[m], b[source[m]]) for a, b in leaves)
        if m in (1, 4):
            assert new_lr[m] / old_lr[source[m]] == pytest.approx(0.5) or \
                new_lr[m] / old_lr[source[m]] == pytest.approx(2.0)
        else:
            assert new_lr[m] == old_lr[m]
    np.testing.assert_array_equal(new.hparams.ent_coef, state.hparams.ent_coef)  # not evolving
    np.testing.assert_array_equal(jax.random.key_data(new.key), jax.random.key_data(state.key))


def test_fitness_is_the_generations_mean_return():
    sums, counts = np.array([[10., 30.], [0., 0.]]), np.array([[1, 3], [0, 0]])
    np.testing.assert_array_equal(generation_fitness(sums, counts), np.float32([10, -np.inf]))


@pytest.mark.parametrize("settings, message", [
    ({"pbt.every": 2, "pbt.fraction": 0.7, "num_seeds": 4},
     r"pbt.fraction=0.7 must be in \(0, 0.5\]"),
    ({"pbt.every": 2, "pbt.perturb": []}, "pbt.perturb=.* non-empty list of factors > 0"),
    ({"pbt.hparams": ["lr", "beta"]}, "pbt.hparams: beta is not one of"),
    ({"pbt.every": 2, "num_seeds": 2}, r"pbt.fraction=0.25 of 2 member\(s\) replaces none"),
    ({"pbt.every": 8, "num_seeds": 4}, "pbt.every=8 is not below the run's 8 updates"),
    ({"pbt.every": 2, "num_seeds": 4, "pbt.hparams": ["target_kl"]}, "target-KL stopping is off"),
])
def test_bad_pbt_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        validate(tiny_config(**settings))


# Half the members start with lr=1e-9, which learns nothing (tests/test_sweep.py's sweep keeps
# them near CartPole's random ~22); a generation every 8 of 48 updates.
PBT = ["+env=cartpole", "total_timesteps=24576", "sweep.lr=[1e-9,2.5e-3]", "num_seeds=2",
       "pbt.every=8", "pbt.fraction=0.5", "log.progress=false", "eval.num_episodes=4",
       "checkpoint.every=16"]


@pytest.fixture(scope="module")
def pbt_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pbt")
    result = run_cli(*PBT, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_pbt_rescues_the_members_that_start_with_a_useless_lr(pbt_run):
    summary = json.loads((pbt_run / "summary.json").read_text())
    assert summary["pbt"]["generations"] == 5
    final_lrs = summary["pbt"]["hparams"]["lr"]
    assert all(lr > 1e-4 for lr in final_lrs)  # every member now has a workable lr
    rescued = [m for m in summary["members"] if m["hparams"] == {"lr": 1e-9}]
    assert len(rescued) == 2 and all(m["final_return"] > 100 for m in rescued)
    rows = [json.loads(line) for line in (pbt_run / "pbt.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [8, 16, 24, 32, 40]
    first = {c["member"] for c in rows[0]["copies"]}
    assert first == {0, 1}  # the lr=1e-9 members are the worst after 8 updates
    assert (pbt_run / "pbt.png").read_bytes()[:4] == b"\x89PNG"


def test_a_pbt_run_resumes_bit_identical(pbt_run, tmp_path):
    resumed = tmp_path / "resumed"
    resume_from_checkpoint(pbt_run, resumed, 16, *PBT)
    for name in ("metrics.jsonl", "pbt.jsonl"):
        assert (resumed / name).read_text() == (pbt_run / name).read_text(), name
