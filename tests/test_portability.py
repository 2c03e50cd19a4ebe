"""Runs that cross machines: a checkpoint written on one plan loads, evaluates, exports, starts
and resumes runs on the other; purerl 0.2.0's checkpoints load; a run trained on N devices
resumes on M."""

import json
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import REPO, cli_env, resume_from_checkpoint, run_cli_ok
from jax.flatten_util import ravel_pytree

import purerl
from purerl.storage.restoring import restore_run

TINY = ["+env=cartpole", "ppo.num_steps=32", "ppo.num_epochs=2", "ppo.num_minibatches=2",
        "network.hidden_sizes=[16,16]", "log.progress=false", "log.tensorboard=false",
        "eval.num_episodes=2"]
FIXTURE = REPO / "tests" / "fixtures" / "run_0.2.0"  # a CartPole run of purerl 0.2.0's CPU plan


def _module_ok(module, *args):
    result = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=cli_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def _rows(run_dir):
    return [{k: v for k, v in json.loads(line).items() if k not in ("sps", "time")}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _is_tree_layout(state) -> bool:
    """Whether Adam's moments are param trees (optax's layout), as every plan saves them."""
    adam = state.opt_state[1]
    return all(jax.tree.structure(moment) == jax.tree.structure(state.params)
               for moment in (adam.mu, adam.nu))


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """16 updates on the plain plan (what a GPU or TPU runs), checkpoints at 8 and 16."""
    run_dir = tmp_path_factory.mktemp("plain")
    run_cli_ok(*TINY, "total_timesteps=2048", "checkpoint.every=8", "plan=plain",
            f"hydra.run.dir={run_dir}")
    return run_dir


def test_a_plain_plan_checkpoint_is_read_on_the_cpu_plan(plain_run, tmp_path):
    """What trained on the plain plan saves the tree layout and names its plan; on the CPU
    (plan=auto: the CPU plan) `purerl.load` acts with its params, the evaluate and export
    commands read it, `init_from` starts from its params and `resume=auto` trains it on."""
    assert _summary(plain_run)["plan"] == "plain"
    saved = restore_run(plain_run)
    assert saved.record["plan"] == "plain" and _is_tree_layout(saved.state)

    policy = purerl.load(plain_run)
    for a, b in zip(jax.tree.leaves(policy.params), jax.tree.leaves(saved.state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[0])
    actions = np.asarray(policy.act(np.zeros((3, 4), np.float32), temperature=0.0)[0])
    assert actions.shape == (3,) and set(actions.tolist()) <= {0, 1}

    evaluated = _module_ok("purerl.evaluate", f"run={plain_run}", "episodes=2")
    assert "temperature" in evaluated.stdout
    exported = tmp_path / "policy.stablehlo"
    _module_ok("purerl.export", f"run={plain_run}", f"out={exported}")
    assert exported.stat().st_size > 0

    started = tmp_path / "started"
    run_cli_ok(*TINY, "total_timesteps=128", f"init_from={plain_run}", f"hydra.run.dir={started}")
    assert _summary(started)["plan"] == "cpu"

    resumed = tmp_path / "resumed"
    shutil.copytree(plain_run, resumed)
    run_cli_ok(*TINY, "total_timesteps=3072", "checkpoint.every=8", "resume=auto",
            f"hydra.run.dir={resumed}")
    summary = _summary(resumed)
    assert (summary["plan"], summary["updates"], summary["status"]) == ("cpu", 24, "completed")
    assert _rows(resumed)[:16] == _rows(plain_run)
    resaved = restore_run(resumed)
    assert resaved.record["plan"] == "cpu" and _is_tree_layout(resaved.state)


def test_a_plain_plan_run_resumes_bit_for_bit_on_its_plan(plain_run, tmp_path):
    """Resumed on the plan that trained it, from the checkpoint of update 8, the run's rows are
    those of the run that never stopped."""
    resume_from_checkpoint(plain_run, tmp_path / "copy", 8, *TINY, "total_timesteps=2048",
                           "checkpoint.every=8", "plan=plain")
    assert _rows(tmp_path / "copy") == _rows(plain_run)


def test_a_cpu_plan_run_resumes_and_starts_runs_on_the_plain_plan(tmp_path):
    """The reverse: trained on the CPU plan, resumed (training more) and used by `init_from`
    with plan=plain."""
    trained = tmp_path / "cpu"
    run_cli_ok(*TINY, "total_timesteps=1024", f"hydra.run.dir={trained}")
    assert _summary(trained)["plan"] == "cpu" and _is_tree_layout(restore_run(trained).state)
    run_cli_ok(*TINY, "total_timesteps=2048", "plan=plain", "resume=auto",
            f"hydra.run.dir={trained}")
    summary = _summary(trained)
    assert (summary["plan"], summary["updates"]) == ("plain", 16)
    started = tmp_path / "started"
    run_cli_ok(*TINY, "total_timesteps=128", "plan=plain", f"init_from={trained}",
            f"hydra.run.dir={started}")
    assert _summary(started)["plan"] == "plain"


def test_a_checkpoint_of_purerl_0_2_0_loads_and_resumes(tmp_path):
    """purerl 0.2.0's CPU plan saved Adam's moments raveled into one vector: its checkpoint
    restores in the tree layout, the values those it saved (read by 0.2.0, in the fixture's
    expected.json), and a run resumes from it."""
    expected = json.loads((FIXTURE / "expected.json").read_text())
    saved = restore_run(FIXTURE)
    assert saved.update == expected["update"] and saved.record["version"] == "0.2.0"
    assert _is_tree_layout(saved.state)
    adam = saved.state.opt_state[1]
    assert int(adam.count[0]) == expected["count"]
    for tree, name in ((saved.state.params, "params"), (adam.mu, "mu"), (adam.nu, "nu")):
        flat = ravel_pytree(jax.tree.map(lambda x: x[0], tree))[0]
        np.testing.assert_array_equal(np.asarray(flat), np.asarray(expected[name], np.float32))
    assert purerl.load(FIXTURE).act(np.zeros((2, 4), np.float32))[0].shape == (2,)

    resumed = tmp_path / "resumed"
    shutil.copytree(FIXTURE, resumed)
    run_cli_ok("+env=cartpole", "env.num_envs=4", "ppo.num_steps=32", "network.hidden_sizes=[8]",
            "checkpoint.keep=1", "log.tensorboard=false", "log.progress=false",
            "total_timesteps=4096", "resume=auto", f"hydra.run.dir={resumed}")
    summary = _summary(resumed)
    assert summary["updates"] == 32 and summary["status"] == "completed"


# Resumes a run on this process's devices, after checking that the state it starts from is the
# checkpoint's (params, optimizer and env states) and lies on all of them; prints the summary.
RESUME = """
import dataclasses, json, sys
import jax, numpy as np
import purerl, purerl.runs.runner as runner
from purerl.storage.restoring import restore_run
run_dir, total = sys.argv[1], int(sys.argv[2])
saved = restore_run(run_dir)  # on one device
opened = runner._open_or_resume
def check(run, *args):
    opened(run, *args)
    parts = lambda s: (s.params, s.opt_state, s.env_state, s.obs)
    for a, b in zip(jax.tree.leaves(parts(run.state)), jax.tree.leaves(parts(saved.state))):
        assert np.array_equal(np.asarray(a), np.asarray(b))
        assert len(a.sharding.device_set) == jax.device_count()
    assert run.update == saved.update
runner._open_or_resume = check
config = dataclasses.replace(saved.config, total_timesteps=total, resume=True)
config.log.progress = False
print(json.dumps(purerl.run(config, run_dir)))
"""


def _resume_on(devices: int, run_dir, total: int) -> dict:
    """Resumes `run_dir` to `total` steps on `devices` forced CPU devices (RESUME's checks);
    returns its summary."""
    script = run_dir.parent / "resume.py"
    script.write_text(RESUME)
    forced = f"--xla_force_host_platform_device_count={devices}"
    result = subprocess.run([sys.executable, str(script), str(run_dir), str(total)], cwd=REPO,
                            env=cli_env({"XLA_FLAGS": forced}), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_run_resumes_on_another_number_of_devices(tmp_path):
    """CartPole trained for 250k steps on 2 forced CPU devices (one seed: its envs split over
    them), resumed on 1 to 500k, then on 2 again to 750k: each resumed run starts from the
    saved params, optimizer and env states, on its devices, and the run solves CartPole."""
    run_dir = tmp_path / "run"
    run_cli_ok("+env=cartpole", "total_timesteps=250_000", "cpu_devices=2", "log.progress=false",
            f"hydra.run.dir={run_dir}")
    assert _summary(run_dir)["devices"] == 2
    summary = _resume_on(1, run_dir, 500_000)
    assert (summary["devices"], summary["updates"]) == (1, 976)
    summary = _resume_on(2, run_dir, 750_000)
    assert (summary["devices"], summary["updates"]) == (2, 1464)
    assert summary["final_return"] >= 475, summary
