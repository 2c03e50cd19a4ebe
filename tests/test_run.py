"""Operable runs through the CLI: evaluation, checkpoints, resume after SIGKILL / Ctrl-C,
init_from, the NaN guard, the artifacts, and `python -m purerl.evaluate`."""

import json
import math
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from typing import NamedTuple

import jax
import numpy as np
import pytest
from conftest import REPO, cli_env, run_cli, run_cli_ok
from test_logging import PNG_MAGIC, read_events, read_scalars

from purerl.config import ConfigError
from purerl.core.schedules import member_hyperparams
from purerl.storage.checkpoint import CHECKPOINTS, Checkpoints
from purerl.storage.restoring import restore_run

# 4 envs x 32 steps = 128 env steps per update.
TINY = ["+env=cartpole", "ppo.num_steps=32", "ppo.num_epochs=2", "ppo.num_minibatches=2",
        "network.hidden_sizes=[16,16]", "log.progress=false"]


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _final_state(run_dir, which="final"):
    saved = restore_run(run_dir, which)
    return saved.update, saved.state, saved.record


def _summary(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in TIMING}


def _host(x):
    """A state leaf as a numpy array (typed PRNG keys as their data)."""
    return np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                      else x)


def _one_line_error(result, code):
    assert result.returncode == code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("purerl: error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """32 updates, evaluated and checkpointed every 8, keeping the 3 newest and the best."""
    run_dir = tmp_path_factory.mktemp("trained")
    run_cli_ok(*TINY, "total_timesteps=4096", "eval.every=8", "eval.num_episodes=4",
            "checkpoint.every=8", "checkpoint.best=true", f"hydra.run.dir={run_dir}")
    return run_dir


def test_run_writes_evals_checkpoints_events_and_plot(trained_run):
    rows = _rows(trained_run)
    assert [r["update"] for r in rows] == list(range(1, 33))
    evaluated = [r for r in rows if "eval_return/1.0" in r]
    assert [r["update"] for r in evaluated] == [8, 16, 24, 32]
    assert all("eval_return/0.0" in r for r in evaluated)
    summary = json.loads((trained_run / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["eval_return"] == {"1.0": rows[-1]["eval_return/1.0"],
                                      "0.0": rows[-1]["eval_return/0.0"]}
    scalars = read_scalars(trained_run)
    assert [step for step, _ in scalars["eval_return/0.0"]] == [1024, 2048, 3072, 4096]
    assert len(scalars["loss/policy_loss"]) == 32
    assert (trained_run / "learning_curve.png").read_bytes()[:8] == PNG_MAGIC
    assert sorted(int(p.name) for p in (trained_run / CHECKPOINTS).iterdir()
                  if p.name.isdigit()) == [16, 24, 32]
    best_update, _, _ = _final_state(trained_run, "best")
    best_eval = max(r["eval_return/1.0"] for r in evaluated)
    assert best_update == next(r["update"] for r in evaluated
                               if r["eval_return/1.0"] == best_eval)


def test_checkpoint_holds_the_whole_state_and_config(trained_run):
    update, state, record = _final_state(trained_run)
    assert update == 32 and int(state.update[0]) == 32
    assert str(jax.random.key_impl(state.key)) == "unsafe_rbg"
    assert record["config"]["env"]["name"] == "CartPole-v1"
    assert np.asarray(record["history"]["count"]).shape == (1, 32)


def test_evaluate_cli_prints_a_table_and_renders(trained_run):
    result = subprocess.run(
        [sys.executable, "-m", "purerl.evaluate", f"run={trained_run}", "episodes=3",
         "temperatures=[0.5,0.0]", "max_steps=5", "render=true"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    table = [line.split("|") for line in result.stdout.splitlines() if "|" in line]
    assert [row[0].strip() for row in table] == ["temperature", "0.5", "0.0"]
    assert all(0 < float(row[1]) <= 5 and float(row[3]) <= 5 for row in table[1:])
    assert (trained_run / "episode_T0.5.gif").read_bytes()[:6] == b"GIF89a"
    assert "error" not in result.stderr  # SDL wanted a display for each frame it drew
    best = subprocess.run([sys.executable, "-m", "purerl.evaluate", f"run={trained_run}",
                           "checkpoint=best", "episodes=2"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert best.returncode == 0 and "(best)" in best.stdout, best.stderr[-3000:]
    bad = subprocess.run([sys.executable, "-m", "purerl.evaluate", f"run={trained_run}",
                          "episode=3"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown argument 'episode=3'" in bad.stderr


def test_resume_rejects_a_changed_config_and_a_missing_checkpoint(trained_run, tmp_path):
    line = _one_line_error(run_cli(*TINY, "total_timesteps=4096", "ppo.lr=1e-3", "resume=true",
                                   f"hydra.run.dir={trained_run}"), 2)
    assert "ppo.lr=0.00025 -> 0.001" in line
    line = _one_line_error(run_cli(*TINY, "total_timesteps=4096", "resume=true",
                                   f"hydra.run.dir={tmp_path}"), 2)
    assert f"resume=true: {tmp_path} holds no checkpoint" in line and "resume=auto" in line
    line = _one_line_error(run_cli(*TINY, "total_timesteps=4096",
                                   f"hydra.run.dir={trained_run}"), 2)
    assert "already holds a run (checkpoints up to update 32): pass resume=auto" in line


def test_init_from_starts_from_another_runs_params(trained_run, tmp_path):
    run_cli_ok(*TINY, "total_timesteps=256", "ppo.lr=1e-12", "ppo.anneal_lr=false",
            f"init_from={trained_run}", f"hydra.run.dir={tmp_path}")
    _, source, _ = _final_state(trained_run)
    _, state, _ = _final_state(tmp_path)
    for a, b in zip(jax.tree.leaves(source.params), jax.tree.leaves(state.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    line = _one_line_error(run_cli(*TINY, "total_timesteps=256", "network.hidden_sizes=[8,8]",
                                   f"init_from={trained_run}", f"hydra.run.dir={tmp_path}/b"), 2)
    assert re.search(r"params\[.*\] has shape \([\d, ]*16[\d, ]*\) there and \([\d, ]*8[\d, ]*\) "
                     r"here", line)


LONG = [*TINY, "total_timesteps=96000", "checkpoint.every=50", "eval.every=150",
        "eval.num_episodes=4", "checkpoint.best=true"]
TIMING = ("compile_s", "train_s", "sps", "checkpoint_s")


def _start_and_stop(run_dir, sig, checkpoint, *args, after_s=0.0):
    """Starts the LONG run with resume=auto (and `args`) and sends `sig` `after_s` seconds
    after checkpoint `checkpoint` is complete; returns (exit code, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "purerl.train", *LONG, "resume=auto", *args,
                             f"hydra.run.dir={run_dir}"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (run_dir / CHECKPOINTS / str(checkpoint)).is_dir():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    time.sleep(after_s)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=300)
    return proc.returncode, stderr


def test_chaos_every_fault_then_resume_auto_ends_bit_identical(tmp_path):
    """One run through every fault, each followed by `resume=auto` (one job script for the
    first start and every restart): SIGKILL once a checkpoint is on disk and once at a random
    moment, SIGTERM (status preempted, exit 143), the newest checkpoint's files truncated (it
    is skipped with a warning), a failed write (metrics.jsonl past a file-size limit, one
    line, exit 1). It ends with the same metrics, summary, best checkpoint and final params
    and optimizer state as a run never stopped."""
    run_cli_ok(*LONG, f"hydra.run.dir={tmp_path / 'whole'}")
    whole_rows = _rows(tmp_path / "whole")
    _, whole, _ = _final_state(tmp_path / "whole")
    whole_summary = _summary(tmp_path / "whole")
    whole_best = _final_state(tmp_path / "whole", "best")[0]

    run_dir = tmp_path / "faults"
    code, _ = _start_and_stop(run_dir, signal.SIGKILL, 50)  # the first start, resume=auto
    assert code == -signal.SIGKILL and not (run_dir / "summary.json").exists()
    checkpoint = Checkpoints(run_dir / CHECKPOINTS).latest()
    code, _ = _start_and_stop(run_dir, signal.SIGKILL, checkpoint,
                              after_s=np.random.default_rng().uniform(0.0, 0.5))
    assert code == -signal.SIGKILL
    checkpoint = Checkpoints(run_dir / CHECKPOINTS).latest()
    code, stderr = _start_and_stop(run_dir, signal.SIGTERM, checkpoint + 50)
    assert code == 143, stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["signal"] == "SIGTERM"
    assert checkpoint + 50 <= summary["updates"] < 750 and summary["checkpoint_s"] > 0
    assert (run_dir / CHECKPOINTS / str(summary["updates"])).is_dir()

    newest = run_dir / CHECKPOINTS / str(summary["updates"])
    for damaged in (newest / "state" / "_METADATA", newest / "record" / "metadata"):
        damaged.write_bytes(damaged.read_bytes()[:20])
    # writes past 64 KB fail with EFBIG (Python ignores SIGXFSZ), as on a full disk
    command = shlex.join([sys.executable, "-m", "purerl.train", *LONG, "resume=auto",
                          f"hydra.run.dir={run_dir}"])
    result = subprocess.run(["bash", "-c", f"ulimit -f 64 && exec {command}"], cwd=REPO,
                            env=cli_env(), capture_output=True, text=True, timeout=300)
    assert f"{newest}: skipped, it does not restore" in result.stdout
    line = _one_line_error(result, 1)
    assert line == f"purerl: error: cannot write {run_dir / 'metrics.jsonl'}: File too large"

    run_cli_ok(*LONG, "resume=auto", f"hydra.run.dir={run_dir}")
    assert _rows(run_dir) == whole_rows
    assert _summary(run_dir) == whole_summary
    assert _final_state(run_dir, "best")[0] == whole_best
    _, state, _ = _final_state(run_dir)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(state)):
        np.testing.assert_array_equal(_host(a), _host(b))
    events = sorted(run_dir.glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    for resumed in events[1:]:
        session_log = read_events(resumed)[1].session_log
        assert session_log.status == session_log.START


def test_kill_during_checkpoint_write_keeps_the_previous_one(tmp_path):
    """The process is SIGKILLed while orbax writes checkpoint 2 (inside the JSON item's save,
    after the state began): checkpoint 1 stays the newest usable one."""
    script = textwrap.dedent(f"""
        import os, signal
        import jax.numpy as jnp
        import orbax.checkpoint as ocp
        from purerl.storage.checkpoint import Checkpoints

        checkpoints = Checkpoints({str(tmp_path)!r})
        checkpoints.save(1, {{"x": jnp.arange(3.0)}}, {{"update": 1}})

        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)

        ocp.JsonCheckpointHandler.save = die
        ocp.JsonCheckpointHandler.async_save = die
        checkpoints.save(2, {{"x": jnp.arange(3.0) + 1}}, {{"update": 2}})
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    assert any("tmp" in p.name for p in tmp_path.iterdir())  # the unfinished write is there
    checkpoints = Checkpoints(tmp_path)
    assert checkpoints.latest() == 1
    state, record = checkpoints.restore(1, {"x": np.zeros(3, np.float32)})
    np.testing.assert_array_equal(state["x"], [0.0, 1.0, 2.0])
    assert record == {"update": 1}


@pytest.mark.parametrize("sharded", [False, True])
def test_a_checkpoint_of_another_structure_is_a_one_line_error(tmp_path, sharded):
    """A checkpoint whose state tree differs from the one to restore into (another purerl
    version's params, say) is a ConfigError naming where, in both of orbax's wordings."""
    checkpoints = Checkpoints(tmp_path)
    checkpoints.save(1, {"a": np.zeros(3, np.float32), "b": np.ones(2, np.float32)},
                     {"update": 1})
    like = {"a": np.zeros(3, np.float32), "c": np.ones(2, np.float32)}
    if sharded:  # as a resumed run restores: into arrays with their shardings
        like = jax.tree.map(jax.numpy.asarray, like)
    with pytest.raises(ConfigError, match=r"/1: its state has another structure .*\bc\b") as info:
        checkpoints.restore(1, like)
    assert "\n" not in str(info.value)


class _Saved(NamedTuple):
    lr: np.ndarray


class _Now(NamedTuple):
    lr: np.ndarray
    extra: object = None


def test_a_checkpoint_saved_before_a_field_was_added_restores_with_it_none(tmp_path):
    """A state saved before a NamedTuple field existed (`HyperParams.extra`, added in 0.2.0)
    restores into today's structure with that field None; the record names the version."""
    checkpoints = Checkpoints(tmp_path)
    checkpoints.save(1, {"hparams": _Saved(np.full(2, 3.0, np.float32))}, {"update": 1})
    state, record = checkpoints.restore(1, {"hparams": _Now(np.zeros(2, np.float32))})
    assert isinstance(state["hparams"], _Now) and state["hparams"].extra is None
    assert state["hparams"].lr.tolist() == [3.0, 3.0] and record == {"update": 1}


def test_nan_guard_stops_and_keeps_the_good_part(tmp_path):
    # NaNChain's NaN reward is a random draw per step (mean first NaN about update 40); with
    # seed 1 it first comes at update 18, after the checkpoints of updates 5, 10 and 15.
    result = run_cli("+env=gymnax", "env.name=custom_envs:NaNChain", *TINY[1:], "seed=1",
                     "total_timesteps=12800", "checkpoint.every=5", f"hydra.run.dir={tmp_path}")
    line = _one_line_error(result, 1)
    bad_update = int(line.split("at update ")[1].split(":")[0])
    assert "non-finite loss" in line and bad_update > 5
    rows = _rows(tmp_path)
    assert [r["update"] for r in rows] == list(range(1, bad_update))
    assert all(r["policy_loss"] is not None and math.isfinite(r["value_loss"]) for r in rows)
    update, state, _ = _final_state(tmp_path)
    assert update == (bad_update - 1) // 5 * 5 and f"checkpoints/{update}" in line
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "nonfinite"


def test_a_failed_event_keeps_what_trained_and_the_run_resumes(trained_run, tmp_path):
    """The trained_run's settings but one checkpoint at the end; its second evaluation
    (update 16) raises. The chunk's rows and a checkpoint of update 16 are still written, and
    resume=true trains on to the same rows as the run that never failed."""
    args = [*TINY, "total_timesteps=4096", "eval.every=8", "eval.num_episodes=4",
            "checkpoint.every=0", "checkpoint.best=true", f"hydra.run.dir={tmp_path}"]
    script = textwrap.dedent(f"""
        import sys
        from purerl import train
        from purerl.runs import compiling

        evaluate, calls = compiling.Programs.evaluate, []

        def failing_second(self, *args):
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("evaluation failed on purpose")
            return evaluate(self, *args)

        compiling.Programs.evaluate = failing_second
        sys.argv[1:] = {args!r}
        train.main()
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=cli_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and "evaluation failed on purpose" in result.stderr
    assert "failed after update 16, checkpoint saved: continue with resume=auto" in result.stdout
    assert [r["update"] for r in _rows(tmp_path)] == list(range(1, 17))
    assert Checkpoints(tmp_path / CHECKPOINTS).latest() == 16

    run_cli_ok(*args, "resume=true")
    whole = _rows(trained_run)
    whole[15] = {k: v for k, v in whole[15].items() if not k.startswith("eval")}  # it failed
    assert _rows(tmp_path) == whole


def test_programs_compiling_meanwhile_add_their_wait_to_compile_s():
    """The evaluation program compiles while the run trains: its first call waits for it and
    adds that wait to `compile_s`; once compiled, calls add nothing; a compile that failed
    raises there."""
    import threading
    from concurrent.futures import Future

    from purerl.runs.compiling import Programs

    class WaitedFor(Future):
        """A compile that finishes once a caller waits for its result."""

        waiting = threading.Event()

        def result(self, timeout=None):
            self.waiting.set()
            return super().result(timeout)

    compiling, failed = WaitedFor(), Future()
    failed.set_exception(RuntimeError("XLA said no"))

    def compile_once_waited_for():
        compiling.waiting.wait()
        compiling.set_result(lambda *args: sum(args))

    programs = Programs(None, None, compiling, failed, compile_s=1.0)
    finisher = threading.Thread(target=compile_once_waited_for)
    finisher.start()
    assert programs.evaluate(1, 2, 3) == 6
    finisher.join()
    waited = programs.compile_s
    assert waited > 1.0  # the wait was added
    assert programs.evaluate(1, 2, 4) == 7 and programs.compile_s == waited
    with pytest.raises(RuntimeError, match="XLA said no"):
        programs.pbt(None, None, None)
    assert programs.compile_s == pytest.approx(waited)


def test_evaluation_compiles_after_compile_programs_returned(monkeypatch):
    """The evaluation program's compile may start only after `compile_programs` returned (a
    warm cache makes init and chunk quick): it still compiles, after the chunk program. Its
    thread is held here until then (it once read the chunk's future after the return had
    rebound that name to the executable)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from conftest import tiny_config

    import purerl.runs.compiling as compiling
    from purerl.parallel.program import make_program

    released = threading.Event()

    class HoldingLaterTasks(ThreadPoolExecutor):
        """Runs init's and the chunk's compiles at once, the later ones after `released`."""

        submitted = 0

        def submit(self, fn, *args):
            self.submitted += 1
            if self.submitted <= 2:
                return super().submit(fn, *args)
            return super().submit(lambda: released.wait() and fn(*args))

    monkeypatch.setattr(compiling, "ThreadPoolExecutor", HoldingLaterTasks)
    config = tiny_config()
    program = make_program(config, chunk=2)
    key = jax.random.key(0)
    try:
        programs = compiling.compile_programs(config, program, key)
    finally:
        released.set()  # a held thread would keep the test process from exiting
    state = programs.init(key, member_hyperparams(config))
    result = programs.evaluate(state.params, state.normalizer.obs, compiling.eval_keys(config, key))
    assert np.isfinite(np.asarray(jax.tree.leaves(result)[0])).all()


def test_compile_s_is_the_compiles_not_what_ran_meanwhile():
    """What runs while init and chunk compile (the sinks' imports) is not compile time: with
    `meanwhile` outlasting every compile by a second, `compile_s` ends before it."""
    import threading

    from conftest import tiny_config

    from purerl.parallel.program import make_program
    from purerl.runs.compiling import compile_programs

    def meanwhile():
        while any(t.name.startswith("compile") for t in threading.enumerate()):
            time.sleep(0.02)
        time.sleep(1.0)

    config = tiny_config()
    program = make_program(config, chunk=2)
    key = jax.random.key(0)
    start = time.perf_counter()
    programs = compile_programs(config, program, key, meanwhile=meanwhile)
    elapsed = time.perf_counter() - start
    assert 0 < programs.compile_s <= elapsed - 1.0
    state, metrics = programs.run_chunk(programs.init(key, member_hyperparams(config)),
                                        np.int32(2))
    assert int(state.update[0]) == 2 and metrics.scalars["loss/policy_loss"].shape == (1, 2)


def test_training_more_continues_a_finished_run(trained_run, tmp_path):
    """resume=true with a larger total_timesteps trains a finished run on from its last
    checkpoint (its rows kept); with checkpoint.every_s tiny, a checkpoint follows every
    chunk. A smaller total than the checkpoint's is one line."""
    import shutil

    run_dir = tmp_path / "more"
    shutil.copytree(trained_run, run_dir)
    run_cli_ok(*TINY, "total_timesteps=6144", "eval.every=8", "eval.num_episodes=4",
            "checkpoint.every=8", "checkpoint.best=true", "checkpoint.every_s=1e-9",
            "resume=true", f"hydra.run.dir={run_dir}")
    rows = _rows(run_dir)
    assert [r["update"] for r in rows] == list(range(1, 49)) and rows[:32] == _rows(trained_run)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["updates"] == 48
    assert sorted(int(p.name) for p in (run_dir / CHECKPOINTS).iterdir()
                  if p.name.isdigit()) == [46, 47, 48]
    line = _one_line_error(run_cli(*TINY, "total_timesteps=2048", "resume=auto",
                                   f"hydra.run.dir={run_dir}"), 2)
    assert "total_timesteps=2048 is 16 updates, fewer than the 48" in line


def test_a_second_run_on_a_held_directory_is_one_line(tmp_path):
    """A run directory that another run holds: one line naming the holder, before compiling."""
    import os
    import socket

    from purerl.runs.run_dir import lock_run_dir

    with lock_run_dir(tmp_path):
        result = run_cli(*TINY, "total_timesteps=256", f"hydra.run.dir={tmp_path}")
        with pytest.raises(ConfigError, match=f"in use by another run .process {os.getpid()} "):
            with lock_run_dir(tmp_path):
                pass
    line = _one_line_error(result, 2)
    assert f"{tmp_path} is in use by another run (process {os.getpid()} on " \
           f"{socket.gethostname()})" in line
    assert "compiled" not in result.stdout


def test_a_run_directory_that_cannot_be_made_is_one_line(tmp_path):
    """hydra.run.dir under a file: one line before Hydra writes there (its own failure is a
    traceback)."""
    (tmp_path / "file").write_text("")
    line = _one_line_error(run_cli(*TINY, f"hydra.run.dir={tmp_path / 'file' / 'run'}"), 1)
    assert line == (f"purerl: error: cannot write {tmp_path / 'file' / 'run'}: "
                    f"{tmp_path / 'file'} is a file, not a directory")
