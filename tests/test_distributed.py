"""Runs across processes: JAX's multi-controller runtime on localhost, collectives over gloo."""

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import cli_env

from purerl.config import ConfigError
from purerl.runs.run_dir import params_from
from purerl.storage.checkpoint import CHECKPOINTS
from purerl.storage.restoring import restore_run
from purerl.validation import validate

TESTS = Path(__file__).parent
# Trains tiny_config (4 envs, split over the 2 devices) and pickles its metrics from process 0.
TRAIN = """
import pickle, sys, jax, numpy as np
from conftest import tiny_config
from purerl.config import DistributedConfig
from purerl.parallel.distributed import initialize
port, process, out = sys.argv[1], sys.argv[2], sys.argv[3]
if process != "alone":
    initialize(DistributedConfig(enabled=True, coordinator=f"localhost:{port}", num_processes=2,
                                 process_id=int(process)))
from jax.experimental import multihost_utils  # gymnax, under purerl.parallel.program, makes arrays
from purerl.parallel.program import make_train
assert jax.device_count() == 2
_, metrics = jax.jit(make_train(tiny_config()))(jax.random.key(0))
if process != "alone":
    metrics = multihost_utils.process_allgather(metrics, tiled=True)
if process in ("0", "alone"):
    pickle.dump(jax.tree.map(np.asarray, metrics), open(out, "wb"))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_train_as_one_process_with_two_devices(tmp_path):
    """2 processes x 1 CPU device train the same bits as 1 process with 2 forced devices: one
    global mesh over both processes' devices, gradients and statistics averaged across them."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = cli_env({"JAX_PLATFORMS": "cpu"})
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script), port, str(i), tmp_path / "multi"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
    forced = {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    alone = subprocess.run([sys.executable, str(script), port, "alone", tmp_path / "alone"],
                           env=forced, capture_output=True, text=True, timeout=300)
    assert alone.returncode == 0, alone.stderr[-3000:]
    multi, single = (pickle.load(open(tmp_path / name, "rb")) for name in ("multi", "alone"))
    assert np.asarray(single.episode_count).sum() > 0
    for a, b in zip(jax.tree.leaves(multi), jax.tree.leaves(single)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("settings, message", [
    ({"distributed.num_processes": 2}, "pass distributed.enabled=true"),
    ({"distributed.enabled": True, "distributed.num_processes": 2, "distributed.process_id": 2},
     r"distributed.process_id=2 must be in \[0, distributed.num_processes=2\)"),
    ({"distributed.enabled": True, "distributed.coordinator": "host"}, "must be host:port"),
    ({"distributed.heartbeat_timeout_s": 0}, "distributed.heartbeat_timeout_s=0 must be > 0"),
])
def test_distributed_settings_are_checked(make_config, settings, message):
    with pytest.raises(ConfigError, match=message):
        validate(make_config(**settings))


def test_processes_with_different_run_dirs_stop_with_one_line(tmp_path):
    procs = _start_two_processes([tmp_path / "a", tmp_path / "b"])
    for proc in procs:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 2, stderr[-3000:]
        assert "purerl: error: hydra.run.dir differs between the processes" in stderr
        assert "Traceback" not in stderr and "compiled" not in stderr


# 16 updates of 4 envs x 16 steps, checkpoints every 4 (3 kept).
RUN = ["+env=cartpole", "total_timesteps=1024", "ppo.num_steps=16", "log.progress=false",
       "eval.num_episodes=2", "checkpoint.every=4"]


def _start_two_processes(run_dir, *args):
    """Starts `python -m purerl.train RUN args` in 2 processes x 1 device sharing `run_dir`
    (or each its own, from a list)."""
    run_dirs = run_dir if isinstance(run_dir, list) else [run_dir] * 2
    port = _free_port()
    env = cli_env()
    return [subprocess.Popen([sys.executable, "-m", "purerl.train", *RUN, *args,
                              "distributed.enabled=true",
                              f"distributed.coordinator=localhost:{port}",
                              "distributed.num_processes=2", f"distributed.process_id={i}",
                              f"hydra.run.dir={run_dirs[i]}"], cwd=TESTS.parent, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]


def _two_processes(run_dir, *args):
    """Both processes of `_start_two_processes`; their (stdout, stderr), after both exit 0."""
    procs = _start_two_processes(run_dir, *args)
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr[-3000:]
    return outputs


def _when_training(run_dir, procs):
    """Waits until the run has logged its first chunk (or a process ended early)."""
    metrics = run_dir / "metrics.jsonl"
    while not metrics.exists() or not metrics.stat().st_size:
        assert all(proc.poll() is None for proc in procs), procs[0].communicate()[1][-3000:]
        time.sleep(0.1)


# 100 updates, a checkpoint every 20.
LONGER = ("total_timesteps=6400", "checkpoint.every=20")


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """A whole 2-process run of RUN + LONGER: its directory and the processes' outputs."""
    run_dir = tmp_path_factory.mktemp("two") / "run"
    return run_dir, _two_processes(run_dir, *LONGER)


def test_two_processes_of_the_command_line_write_one_run(two_process_run, tmp_path):
    """The README's command in 2 processes x 1 device, one shared run directory: the same
    metrics.jsonl and summary as 1 process with 2 forced devices, checkpoints saved by both
    (orbax) and restored whole in this one-device process; process 0 alone logs."""
    from conftest import run_cli

    forced = run_cli(*RUN, *LONGER, f"hydra.run.dir={tmp_path / 'forced'}",
                     env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert forced.returncode == 0, forced.stderr[-3000:]
    multi, outputs = two_process_run
    said = ["".join(output) for output in outputs]
    assert "final return" in said[0] and "final return" not in said[1]
    single = tmp_path / "forced"
    names = [sorted(p.name.split(".")[0] for p in d.iterdir()) for d in (multi, single)]
    assert names[0] == names[1]  # one events file, one train.log, one .hydra/: process 0's
    assert (multi / "metrics.jsonl").read_text() == (single / "metrics.jsonl").read_text()
    timing = ("compile_s", "train_s", "checkpoint_s", "sps", "processes")
    summaries = [{k: v for k, v in json.loads((d / "summary.json").read_text()).items()
                  if k not in timing} for d in (multi, single)]
    assert summaries[0] == summaries[1] and summaries[0]["devices"] == 2
    assert json.loads((multi / "summary.json").read_text())["processes"] == 2
    a, b = restore_run(multi), restore_run(single)
    assert a.update == b.update == 100 and a.record["processes"] == 2
    for x, y in zip(jax.tree.leaves(a.state.params), jax.tree.leaves(b.state.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # init_from and `python -m purerl.evaluate` read it in one process
    init = params_from(multi, b.state.params)
    for x, y in zip(jax.tree.leaves(init), jax.tree.leaves(b.state.params)):
        np.testing.assert_array_equal(x, np.asarray(y))
    evaluated = subprocess.run([sys.executable, "-m", "purerl.evaluate", f"run={multi}",
                                "episodes=2"], cwd=TESTS.parent, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(TESTS.parent)}, timeout=300)
    assert evaluated.returncode == 0 and "temperature" in evaluated.stdout, evaluated.stderr



def test_two_processes_preempted_resume_bit_identical(two_process_run, tmp_path):
    """SIGTERM to both processes (as SLURM sends it to every task) once a checkpoint is on
    disk: both stop after the same chunk, save its checkpoint together and exit 143; both
    restarted with resume=auto: the same metrics.jsonl and state as the run never stopped."""
    (whole, _), stopped = two_process_run, tmp_path / "stopped"
    procs = _start_two_processes(stopped, *LONGER, "resume=auto")
    while not (stopped / CHECKPOINTS / "20").is_dir():
        assert all(proc.poll() is None for proc in procs), procs[0].communicate()[1][-3000:]
        time.sleep(0.01)
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [143, 143], outputs[0][1][-3000:]
    summary = json.loads((stopped / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["updates"] < 100
    assert restore_run(stopped).update == summary["updates"]
    _two_processes(stopped, *LONGER, "resume=auto")
    assert (stopped / "metrics.jsonl").read_text() == (whole / "metrics.jsonl").read_text()
    a, b = restore_run(whole).state, restore_run(stopped).state
    for x, y in zip(jax.tree.leaves((a.params, a.opt_state)),
                    jax.tree.leaves((b.params, b.opt_state))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_process_killed_mid_run_ends_the_other_with_one_line(tmp_path):
    """SIGKILL of process 1: process 0 exits 1, its next collective failing, and says so in
    one line; the rows already written stay whole. (JAX's heartbeat, 30 s here, would end it
    later with JAX's own message; with 10 s, both processes were once ended by it
    while they started on a stalled machine. When process 0 dies, the others lose JAX's
    coordinator with it, and JAX's client ends them first, with its own message, about as
    often as not: measured by hand, see the README.)"""
    procs = _start_two_processes(tmp_path, "total_timesteps=500_000", "checkpoint.every=0",
                                 "distributed.heartbeat_timeout_s=30")
    _when_training(tmp_path, procs)
    procs[1].send_signal(signal.SIGKILL)
    _, stderr = procs[0].communicate(timeout=60)
    assert procs[0].returncode == 1 and stderr.strip().count("\n") == 0
    assert "lost another process of the run" in stderr
    procs[1].communicate()
    assert all(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())


def test_a_signal_to_one_process_stops_both_at_one_checkpoint(tmp_path):
    """SIGUSR1 (what `sbatch --signal=USR1@120` sends before a time limit) to process 1 alone:
    both processes stop after the same chunk (one collective flag), save that update's
    checkpoint together and exit 138."""
    procs = _start_two_processes(tmp_path, "total_timesteps=500_000", "checkpoint.every=0")
    _when_training(tmp_path, procs)
    procs[1].send_signal(signal.SIGUSR1)
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [138, 138], outputs[0][1][-3000:]
    rows = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert restore_run(tmp_path).update == json.loads(rows[-1])["update"]
