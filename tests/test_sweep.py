"""Sweeps inside the program: `sweep.<name>=[...]` grid points x seeds, one vmapped batch."""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import REPO, resume_from_checkpoint, run_cli, tiny_config

import purerl
from purerl.config import ConfigError, auto_cpu_devices
from purerl.core.schedules import member_hyperparams
from purerl.parallel.program import make_train
from purerl.runs.run_dir import params_from
from purerl.storage.restoring import restore_run
from purerl.validation import validate

TIMING = ("compile_s", "train_s", "checkpoint_s", "sps")


def test_members_are_grid_points_times_seeds():
    config = tiny_config(num_seeds=2, **{"sweep.lr": [1e-3, 2.5e-4],
                                         "sweep.ent_coef": [0.0, 0.01]})
    assert config.num_members == 8
    assert config.sweep.grid() == [{"lr": 1e-3, "ent_coef": 0.0}, {"lr": 1e-3, "ent_coef": 0.01},
                                   {"lr": 2.5e-4, "ent_coef": 0.0},
                                   {"lr": 2.5e-4, "ent_coef": 0.01}]
    hparams = member_hyperparams(config)
    np.testing.assert_array_equal(hparams.lr, np.float32([1e-3] * 4 + [2.5e-4] * 4))
    np.testing.assert_array_equal(hparams.ent_coef, np.float32([0, 0, .01, .01] * 2))
    np.testing.assert_array_equal(hparams.gamma, np.float32([0.99] * 8))


def test_a_member_trains_as_the_plain_run_of_its_grid_point():
    """With a PRNG whose vmapped draws do not depend on the batch (threefry; the default
    unsafe_rbg's do), member (lr=2.5e-4, ent_coef=0.01, seed 1) of a 4-point sweep plays the
    same episodes as a plain run of those settings, its losses equal up to float rounding."""
    swept = {"sweep.lr": [1e-3, 2.5e-4], "sweep.ent_coef": [0.0, 0.01]}
    sweep = tiny_config(num_seeds=2, prng_impl="threefry2x32", **swept)
    plain = tiny_config(num_seeds=2, prng_impl="threefry2x32",
                        **{"ppo.lr": 2.5e-4, "ppo.ent_coef": 0.01})
    _, ours = jax.jit(make_train(sweep))(jax.random.key(0))
    _, theirs = jax.jit(make_train(plain))(jax.random.key(0))
    np.testing.assert_array_equal(ours.episode_count[7], theirs.episode_count[1])
    for name in ("loss/policy_loss", "loss/value_loss", "loss/entropy"):
        np.testing.assert_allclose(ours.scalars[name][7], theirs.scalars[name][1],
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    for name in ("learning_rate", "ent_coef"):
        np.testing.assert_allclose(ours.scalars[name][7], theirs.scalars[name][1],
                                   rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("settings, message", [
    ({"sweep.lr": []}, r"sweep.lr=\[\] is empty"),
    ({"sweep.gamma": [0.9, 1.5]}, r"sweep.gamma=\[0.9, 1.5\]: 1.5 is out of range, each value "
                                  r"must be in \[0, 1\]"),
    ({"sweep.lr": [0.1, 0.1]}, "has a repeated value"),
    ({"sweep.target_kl": [0.0]}, "must be > 0"),
])
def test_bad_sweeps_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        validate(tiny_config(**settings))


def test_a_misspelt_sweep_name_is_one_line_before_compiling():
    result = run_cli("+env=cartpole", "sweep.ent_coeff=[0.1]")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("purerl: error: unknown setting sweep.ent_coeff "
                                     "(did you mean sweep.ent_coef?)")


# 2 grid points x 2 seeds of CartPole, 48 updates of 4 envs x 128 steps, one compile.
SWEEP = ["+env=cartpole", "total_timesteps=24576", "sweep.lr=[1e-9,2.5e-3]", "num_seeds=2",
         "log.progress=false", "eval.num_episodes=4", "checkpoint.every=16"]


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("sweep")
    result = run_cli(*SWEEP, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, result


def test_a_sweep_learns_where_its_lr_works_in_one_compile(sweep_run):
    """lr=1e-9 stays near random (CartPole's ~22), lr=2.5e-3 learns; one program for all,
    its 4 members split over the CPU's cores as devices (`cpu_devices=0`)."""
    run_dir, result = sweep_run
    assert (result.stdout + result.stderr).count("compiled in") == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["devices"] == auto_cpu_devices([4])
    assert summary["num_members"] == 4 and len(summary["members"]) == 4
    best, worst = summary["combinations"]
    assert summary["best"] == best and best["hparams"] == {"lr": 2.5e-3}
    assert worst["hparams"] == {"lr": 1e-9} and worst["members"] == [0, 1]
    assert best["final_return"] > 100 and worst["final_return"] < 40
    assert all(r < 40 for r in worst["final_return_per_seed"])
    assert all(m["eval_return"] is not None and set(m["eval_return"]) == {"1.0", "0.0"}
               for m in summary["members"])
    assert [m["seed"] for m in summary["members"]] == [0, 1, 0, 1]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 48 and "episode_return" in rows[-1]
    assert len(rows[-1]["episode_return_per_member"]) == 4
    assert len(rows[-1]["episode_return_per_point"]) == 2
    assert "best of 2 grid points: lr=0.0025" in result.stderr + result.stdout


def test_evaluate_and_init_from_take_the_best_member_or_the_one_asked(sweep_run, tmp_path):
    run_dir, _ = sweep_run
    evaluate = [sys.executable, "-m", "purerl.evaluate", f"run={run_dir}", "episodes=2"]
    best = subprocess.run(evaluate, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert best.returncode == 0, best.stderr
    assert "(lr=0.0025)" in best.stdout.splitlines()[0]
    policy = purerl.load(run_dir, member=0)  # as the evaluate CLI's member=0 reads it
    assert policy.member == 0 and policy.config.sweep.grid()[0] == {"lr": 1e-9}
    saved = restore_run(run_dir)
    members = json.loads((run_dir / "summary.json").read_text())["members"]
    chosen = max(range(4), key=lambda m: members[m]["final_return"])
    assert chosen in (2, 3)  # lr=2.5e-3
    like = jax.tree.map(lambda x: x[:1], saved.state.params)
    params = params_from(run_dir, like)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(saved.state.params)):
        np.testing.assert_array_equal(a[0], np.asarray(b)[chosen])
    params = params_from(run_dir, like, init_member=1)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(saved.state.params)):
        np.testing.assert_array_equal(a[0], np.asarray(b)[1])
    with pytest.raises(ConfigError, match="init_member=7: .* has 4 member"):
        params_from(run_dir, like, init_member=7)


def test_a_sweep_resumes_bit_identical(sweep_run, tmp_path):
    run_dir, _ = sweep_run
    resumed = tmp_path / "resumed"
    resume_from_checkpoint(run_dir, resumed, 16, *SWEEP)
    assert (resumed / "metrics.jsonl").read_text() == (run_dir / "metrics.jsonl").read_text()
    summaries = [{k: v for k, v in json.loads((d / "summary.json").read_text()).items()
                  if k not in TIMING} for d in (run_dir, resumed)]
    assert summaries[0] == summaries[1]


def test_a_sweep_resumes_on_another_device_count(sweep_run, tmp_path):
    """The members split over the devices (4 over the CPU's cores): resumed from the
    checkpoint of update 16 on another device count, the run goes on from there, says so in
    its log, and keeps its rows up to the checkpoint."""
    run_dir, _ = sweep_run
    devices = json.loads((run_dir / "summary.json").read_text())["devices"]
    other = 1 if devices > 1 else 2
    resumed = tmp_path / "resumed"
    result = resume_from_checkpoint(run_dir, resumed, 16, *SWEEP, f"cpu_devices={other}")
    assert (f"was trained on {devices} device(s) of 1 process(es) with plan cpu, this run has "
            f"{other} device(s)") in result.stdout
    summary = json.loads((resumed / "summary.json").read_text())
    assert (summary["devices"], summary["updates"], summary["status"]) == (other, 48, "completed")
    rows = [(d / "metrics.jsonl").read_text().splitlines() for d in (run_dir, resumed)]
    assert rows[0][:16] == rows[1][:16] and len(rows[1]) == 48


def test_a_hydra_sweep_with_a_diverging_job_finishes_the_others(tmp_path):
    """-m with lr=1e30 (the NaN guard stops it) and lr=2.5e-4, each job itself a vmapped sweep:
    the second job still runs; each writes its summary.json; the sweep ends with one line per
    failed job, exit 1."""
    result = run_cli("-m", "+env=cartpole", "ppo.lr=1e30,2.5e-4", "sweep.ent_coef=[0.0,0.01]",
                     "total_timesteps=2048",
                     "ppo.num_steps=32", "log.progress=false", "eval.num_episodes=2",
                     f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    ours = [line for line in result.stderr.splitlines() if line.startswith("purerl: error:")]
    assert len(ours) == 1 and "job #0 (+env=cartpole ppo.lr=1e+30" in ours[0]
    assert "failed: non-finite" in ours[0] and result.stderr.strip().endswith(ours[0])
    statuses = [json.loads((tmp_path / str(job) / "summary.json").read_text())["status"]
                for job in (0, 1)]
    assert statuses == ["nonfinite", "completed"]


def test_an_interval_sweep_needs_a_sampling_sweeper():
    result = run_cli("-m", "+env=cartpole", "ppo.lr=interval(1e-4,1e-2)")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "purerl: error: ppo.lr=interval(1e-4,1e-2): Hydra's basic sweeper takes lists, choice() "
        "and range(); interval() needs a sampling sweeper, such as Optuna's (pip install -e "
        "'.[sweep]', hydra/sweeper=purerl_optuna)")


def test_the_optuna_sweeper_runs_trials_end_to_end(tmp_path):
    """3 trials over a shape (env.num_envs) and an lr interval, each itself a vmapped sweep:
    Optuna's best value is the best trial's best grid point."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    import yaml

    result = run_cli("-m", "+env=cartpole", "hydra/sweeper=purerl_optuna",
                     "hydra.sweeper.n_trials=3", "ppo.lr=interval(1e-3,1e-2)",
                     "env.num_envs=choice(4,8)", "sweep.ent_coef=[0.0,0.01]",
                     "total_timesteps=2048", "ppo.num_steps=32", "log.progress=false",
                     "eval.num_episodes=2", f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    bests = [json.loads((tmp_path / str(job) / "summary.json").read_text())["best"]
             for job in range(3)]
    optimized = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert optimized["best_value"] == pytest.approx(max(b["final_return"] for b in bests))
    assert set(optimized["best_params"]) == {"ppo.lr", "env.num_envs"}


def test_a_launcher_not_installed_is_one_line_naming_the_extra():
    from purerl.cli.preflight import installed

    if installed("hydra_plugins.hydra_submitit_launcher"):
        pytest.skip("hydra-submitit-launcher is installed here")
    result = run_cli("-m", "+env=cartpole", "hydra/launcher=submitit_slurm")
    assert result.returncode == 2 and result.stderr.strip() == (
        "purerl: error: hydra/launcher=submitit_slurm needs hydra-submitit-launcher, not "
        "installed: pip install -e '.[cluster]'")
