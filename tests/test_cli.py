"""`python -m purerl.train` as a user runs it: errors, outputs, learning, devices, sweeps."""

import importlib.util
import json
import re

import jax
import pytest
from conftest import tiny_config

from purerl.cli.preflight import preflight
from purerl.config import ConfigError
from purerl.runs.compiling import eval_keys

TINY = ["total_timesteps=1024", "ppo.num_steps=32", "ppo.num_epochs=2", "ppo.num_minibatches=2",
        "network.hidden_sizes=[16,16]"]

PPO_LOSSES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")
# PPO's loss metrics as `loss/<name>`, and under their deprecated unprefixed names too
METRIC_KEYS = {"update", "env_steps", "episode_return", "episode_length",
               *(f"loss/{name}" for name in PPO_LOSSES), *PPO_LOSSES, "explained_variance",
               "value_mean", "learning_rate", "opt_steps"}
SUMMARY_KEYS = {"env", "num_seeds", "devices", "env_steps", "final_return",
                "final_return_per_seed", "compile_s", "train_s", "checkpoint_s", "sps"}

VALIDATION_CASES = [
    ([], r"no environment given: pass \+env=<preset> \(presets: acrobot, .*cartpole, .*gymnax"),
    (["env=cartpole"], r"pass the preset with a plus: \+env=cartpole"),
    (["+env=cartpol"], r"unknown preset \+env=cartpol: did you mean cartpole\?"),
    (["+env=gymnax", "env.name=CartPole-v0"],
     "not a gymnax environment id; did you mean CartPole-v1"),
    (["+env=gymnax", "env.name=no_such_pkg.envs:MyEnv"], "cannot import module 'no_such_pkg.envs'"),
    (["+env=cartpole", "ppo.lrr=1e-3"], r"unknown setting ppo.lrr \(did you mean ppo.lr\?\)"),
    (["+env=cartpole", "+ppo.clip=1"], "unknown setting ppo.clip"),
    (["+env=cartpole", "total_timesteps=1e7"], "total_timesteps=10000000.0: .*Integer"),
    (["+env=cartpole", "ppo.num_steps=many"], "ppo.num_steps='many'"),
    (["+env=cartpole", "ppo.num_minibatches=3"],
     "4 \\* 128 = 512 is not divisible by ppo.num_minibatches=3"),
    (["+env=cartpole", "total_timesteps=500"], "total_timesteps=500 is smaller than one update"),
    (["+env=cartpole", "ppo.lr=0"], "ppo.lr=0.0 must be > 0"),
    (["+env=cartpole", "ppo.gamma=1.5"], r"ppo.gamma=1.5 must be in \[0, 1\]"),
    (["+env=cartpole", "ppo.gae_lambda=-1"], r"ppo.gae_lambda=-1.0 must be in \[0, 1\]"),
    (["+env=cartpole", "ppo.clip_eps=-0.1"], "ppo.clip_eps=-0.1 must be > 0"),
    (["+env=cartpole", "env.num_envs=0"], "env.num_envs=0 must be > 0"),
    (["+env=gymnax", "env.name=custom_envs:DictActions"], "action space Dict.* is not supported"),
    (["+env=gymnax", "env.name=custom_envs:UnboundedBox"], "has infinite bounds"),
    (["-m", "+env=cartpole", "ppo.lr=1e-3,-1"], "ppo.lr=-1.0 must be > 0"),
    (["+env=cartpole", "network=cnn"], r"needs image observations .* gives shape \(4,\)"),
    (["+env=cartpole", "env.params.max_step=9"], r"CartPole-v1 params have no field 'max_step'"),
    (["+env=cartpole", "eval.temperatures=[1.0,1]"],
     r"eval.temperatures=\[1.0, 1.0\] has a repeated"),
    (["+env=cartpole", "eval.temperatures=[-1]"], r"eval.temperatures=\[-1.0\] must be .* >= 0"),
    (["+env=cartpole", "checkpoint.keep=0"], "checkpoint.keep=0 must be > 0"),
    (["+env=cartpole", "env.clip_obs=0"], "env.clip_obs=0.0 must be > 0"),
    (["+env=cartpole", "cpu_devices=-1"], r"cpu_devices=-1 must be >= 0"),
    (["-m", "+env=cartpole", "cpu_devices=0,1"], "cpu_devices=0,1: the jobs of a sweep run in one"),
    (["+env=cartpole", "env.params.max_steps_in_episode=abc"],
     r"env.params.max_steps_in_episode='abc' must be an integer \(CartPole-v1's default: 500\)"),
    (["+env=cartpole", "env.params.max_steps_in_episode=-5"],
     r"env.params.max_steps_in_episode=-5 must be > 0"),
    (["+env=cartpole", "env.params.max_steps_in_episode=1.5"],
     r"env.params.max_steps_in_episode=1.5 must be an integer"),
    (["+env=cartpole", "env.params.gravity=-9.8"], r"env.params.gravity=-9.8 must be >= 0"),
]


@pytest.mark.parametrize("argv, message", VALIDATION_CASES)
def test_preflight_rejects(argv, message):
    with pytest.raises(ConfigError, match=message):
        preflight(argv)


@pytest.mark.parametrize("argv, message", [VALIDATION_CASES[i] for i in (0, 2, 5, 9, -4, -3, -2)])
def test_cli_error_is_one_line_exit_2(cli, tmp_path, argv, message):
    result = cli(*argv, f"hydra.run.dir={tmp_path}")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("purerl: error: ")
    assert re.search(message, lines[0])
    assert not (tmp_path / "metrics.jsonl").exists()  # failed before anything ran


HEAVY = {"jax", "jaxlib", "gymnax", "flax", "optax", "orbax", "tensorboardX", "matplotlib"}


@pytest.mark.parametrize("argv, message", [VALIDATION_CASES[i] for i in (0, 2, 5, 7, 9, 11, 18)])
def test_a_bad_setting_fails_before_jax_is_imported(cli, tmp_path, argv, message):
    """Every setting is checked before JAX, gymnax and the sinks' libraries are imported, so
    that the answer comes at once (`-X importtime` lists every module the process imported)."""
    result = cli(*argv, f"hydra.run.dir={tmp_path}", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    imported = {line.split("|")[-1].strip().split(".")[0] for line in lines
                if line.startswith("import time:")}
    assert {"hydra", "purerl"} <= imported  # the import listing is there
    assert not imported & HEAVY
    assert re.search(message, lines[-1]) and lines[-1].startswith("purerl: error: ")


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed")
def test_wandb_without_wandb_installed_is_a_clear_error():
    with pytest.raises(ConfigError, match="log.wandb=true but wandb is not installed"):
        preflight(["+env=cartpole", "log.wandb=true"])


def test_preflight_accepts_env_params_without_plus():
    preflight(["+env=cartpole", "env.params.max_steps_in_episode=200"])


def test_cpu_devices_makes_that_many_devices(cli, tmp_path):
    """`cpu_devices=2` gives the run 2 CPU devices, whatever the machine's cores: 3 envs of one
    seed do not split over them."""
    result = cli("+env=cartpole", "env.num_envs=3", "cpu_devices=2", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "purerl: error: env.num_envs=3 is not divisible by the number of devices (2)")


def test_cli_rejects_envs_not_divisible_by_devices(cli, tmp_path):
    result = cli("+env=cartpole", "env.num_envs=3", f"hydra.run.dir={tmp_path}",
                 env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "purerl: error: env.num_envs=3 is not divisible by the number of devices (2)")


def test_smoke_run_writes_metrics_and_summary(cli, tmp_path):
    cache = tmp_path / "xla"  # compile_cache=null: the default, this cache, is not used
    result = cli("+env=cartpole", *TINY, "log_every=2", "compile_cache=null",
                 f"hydra.run.dir={tmp_path}", env={"JAX_COMPILATION_CACHE_DIR": str(cache)})
    assert result.returncode == 0, result.stderr
    assert not cache.exists()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [2, 4, 6, 8]  # 8 updates of 4 x 32 steps, every 2nd
    assert all(set(r) >= METRIC_KEYS for r in rows)
    assert rows[-1]["env_steps"] == 1024 and rows[0]["opt_steps"] == 4
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    assert summary["env"] == "CartPole-v1" and summary["devices"] == 1
    assert summary["env_steps"] == 1024 and summary["sps"] > 0
    assert summary["final_return"] == summary["final_return_per_seed"][0] > 0
    progress = [line for line in result.stdout.splitlines() if "steps/s" in line]
    assert 2 <= len(progress) <= 12  # a few progress lines, not one per update


def test_custom_env_factory_and_multirun(cli, tmp_path):
    """A sweep's jobs that differ from an earlier one only in the seed and the learning rate
    run its programs (compile_s 0) and write what a run of their settings alone writes; the
    two env counts compile once each."""
    env = ["+env=gymnax", "env.name=custom_envs:make_short_chain", *TINY]
    result = cli("-m", *env, "seed=0,1", "env.num_envs=4,8", "ppo.lr=1e-3,2e-3",
                 f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    jobs = [str(job) for job in range(8)]  # (seed, num_envs, lr), lr changing fastest
    summaries = [json.loads((tmp_path / job / "summary.json").read_text()) for job in jobs]
    assert [s["env"] for s in summaries] == ["custom_envs:make_short_chain"] * 8
    assert summaries[0]["final_return_per_seed"] != [] and summaries[0]["env_steps"] == 1024
    compiled = [job for job, s in enumerate(summaries) if s["compile_s"] > 0]
    assert compiled == [0, 2]  # job 4 runs job 0's programs, though job 3 ran others
    alone = cli(*env, "seed=1", "env.num_envs=4", "ppo.lr=2e-3",
                f"hydra.run.dir={tmp_path / 'alone'}")
    assert alone.returncode == 0, alone.stderr
    metrics = [(tmp_path / run / "metrics.jsonl").read_text() for run in [*jobs, "alone"]]
    assert metrics[5] == metrics[8] and len(set(metrics[:8])) == 8


def test_cartpole_default_preset_learns(cli, tmp_path):
    result = cli("+env=cartpole", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final_return"] >= 475, summary


def test_serialized_network_learns_cartpole(cli, tmp_path):
    """The mean final return of 4 vmapped seeds reaches 475: one seed alone ends within a few
    points of it either way (468-500 over seeds 0-3)."""
    result = cli("+env=cartpole", "network=serialized", "ppo.lr=1e-3", "num_seeds=4",
                 f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["final_return"] >= 475


def test_compile_cache_setting(cli, tmp_path):
    """compile_cache=PATH moves JAX's persistent compilation cache; by default it is
    $JAX_COMPILATION_CACHE_DIR when set, where another seed's run finds every program it
    needs (compile_cache=null: see the smoke test)."""
    moved, env_cache, xdg = tmp_path / "moved", tmp_path / "env_cache", tmp_path / "xdg"
    env = {"JAX_COMPILATION_CACHE_DIR": str(env_cache), "XDG_CACHE_HOME": str(xdg)}
    first = cli("+env=cartpole", *TINY, f"compile_cache={moved}",
                f"hydra.run.dir={tmp_path / 'first'}", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    entries = sorted(p.name for p in moved.iterdir())
    assert len(entries) >= 3  # the init, chunk and evaluation programs at least

    second = cli("+env=cartpole", *TINY, "seed=1", f"hydra.run.dir={tmp_path / 'second'}",
                 env={**env, "JAX_COMPILATION_CACHE_DIR": str(moved)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(p.name for p in moved.iterdir()) == entries  # nothing compiled anew
    assert not env_cache.exists() and not (xdg / "purerl").exists()


def test_evaluation_draws_from_the_runs_prng():
    """The evaluation's keys are in the run's PRNG (its program then compiles unsafe_rbg's
    few kernels, not threefry's loops), one per seed."""
    keys = eval_keys(tiny_config(num_seeds=3), jax.random.key(0))
    assert keys.shape == (3,) and str(jax.random.key_impl(keys)) == "unsafe_rbg"
    keys = eval_keys(tiny_config(num_seeds=3, prng_impl="threefry2x32"), jax.random.key(0))
    assert str(jax.random.key_impl(keys)) == "threefry2x32"


def test_help_lists_settings_presets_and_docs_without_jax(cli):
    """`--help` is purerl's: every setting with its default and comment, the presets, where the
    docs are; before Hydra, without importing JAX."""
    result = cli("--help", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    for text in ("ppo.lr=0.00025 [float] Adam learning rate", "checkpoint.every_s=600.0",
                 "resume=false", "  cartpole ", "network=<name>", "docs/ in the repository"):
        assert text in result.stdout
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "purerl" in imported and not imported & HEAVY


def test_settings_reference_covers_the_schema_with_comments():
    from purerl.cli.preflight import _schema_keys
    from purerl.cli.settings_help import settings_reference

    rows = settings_reference()
    keys = {re.sub(r"^ppo\.schedule\.\w+\.", "ppo.schedule.<name>.", k) for k in _schema_keys()}
    assert [r.key for r in rows] == list(dict.fromkeys(r.key for r in rows))  # each once
    assert {r.key for r in rows} == keys
    assert [r.key for r in rows if not r.comment] == []
    assert rows[[r.key for r in rows].index("total_timesteps")].default == "500_000"


def test_version(cli):
    from purerl.version import __version__

    result = cli("--version")
    assert result.returncode == 0 and result.stdout == f"purerl {__version__}\n"
