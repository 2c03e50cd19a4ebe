"""`purerl.run` from Python with events of a user's: what an event sees, rows it adds, a stop
it asks for (and the run resumed after it), `stop_at_return` and events by name on the command
line, and the log lines `purerl.run` shows."""

import json
import logging

import numpy as np
import pytest
from conftest import run_cli, tiny_config

import purerl
from purerl.cli.preflight import preflight
from purerl.config import ConfigError
from purerl.runs.events import Event
from purerl.runs.program_cache import ProgramCache
from purerl.storage.checkpoint import CHECKPOINTS, Checkpoints
from purerl.storage.restoring import restore_run


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def cache():
    """The runs below differ only in host-side settings: one compile serves them all."""
    return ProgramCache()


def _config(**overrides):
    return tiny_config(**{"log.progress": False, "log.tensorboard": False,
                          "eval.num_episodes": 2, "checkpoint.every": 4, **overrides})


class Recorder(Event):
    """Every 2 updates: records what it sees and adds a metric of its own to the row."""

    every = 2

    def __init__(self):
        self.seen = []

    def handle(self, run, chunk):
        kernel = np.asarray(run.state.params["params"]["towers"]["kernel_0"])  # [M, 2, 4, 16]
        self.seen.append((run.update, run.env_steps, chunk.rows[-1]["update"], kernel.shape))
        chunk.rows[-1]["custom/param_norm"] = float(np.linalg.norm(kernel))


class StopAt(Event):
    """Asks the run to stop once it reaches `update`."""

    def __init__(self, update):
        self.update = update

    def handle(self, run, chunk):
        if run.update >= self.update:
            run.request_stop(self.name)


def test_an_event_sees_the_run_and_its_rows_are_logged(tmp_path, cache):
    recorder = Recorder()
    summary = purerl.run(_config(), tmp_path, events=[recorder], cache=cache)
    assert summary["status"] == "completed" and summary["updates"] == 8
    batch = 4 * 16
    assert recorder.seen == [(u, u * batch, u, (1, 2, 4, 16)) for u in (2, 4, 6, 8)]
    logged = {r["update"]: r for r in _rows(tmp_path)}
    assert [u for u in logged if "custom/param_norm" in logged[u]] == [2, 4, 6, 8]
    assert all(logged[u]["custom/param_norm"] > 0 for u in (2, 4, 6, 8))


def test_a_stop_ends_the_run_cleanly_and_resume_trains_on(tmp_path, cache):
    """Stopped after update 3 (no event due there): the final evaluation, the row and a
    checkpoint of update 3 are written; resumed, the run trains to the end, and its updates
    are those of a run that never stopped."""
    stopped = tmp_path / "stopped"
    summary = purerl.run(_config(), stopped, events=[StopAt(3)], cache=cache)
    assert summary["status"] == "stopped" and summary["stopped_by"] == "StopAt"
    assert summary["updates"] == 3 and summary["eval_return"] is not None
    rows = _rows(stopped)
    assert [r["update"] for r in rows] == [1, 2, 3] and "eval_return/1.0" in rows[-1]
    assert Checkpoints(stopped / CHECKPOINTS).latest() == 3
    written = json.loads((stopped / "summary.json").read_text())
    assert written["status"] == "stopped" and written["stopped_by"] == "StopAt"

    import dataclasses

    resumed = purerl.run(dataclasses.replace(_config(), resume=True), stopped, cache=cache)
    assert resumed["status"] == "completed" and resumed["updates"] == 8
    whole = tmp_path / "whole"
    purerl.run(_config(), whole, cache=cache)
    losses = lambda rows: [(r["update"], r["policy_loss"], r["value_loss"]) for r in rows]  # noqa: E731
    assert losses(_rows(stopped)) == losses(_rows(whole))


def test_stop_at_return_on_the_command_line(tmp_path):
    """CartPole's first updates end episodes of return >= 5: the run stops after the first
    logged update (every 2nd), exit code 0, resumable."""
    result = run_cli("+env=cartpole", "ppo.num_steps=16", "ppo.num_epochs=1",
                     "ppo.num_minibatches=1", "network.hidden_sizes=[8,8]", "log.progress=false",
                     "total_timesteps=2048", "log_every=2", "stop_at_return=5",
                     "eval.num_episodes=2", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["stopped_by"] == "stop_at_return"
    assert summary["updates"] == 2 and summary["eval_return"] is not None
    assert _rows(tmp_path)[-1]["episode_return"] >= 5
    assert Checkpoints(tmp_path / CHECKPOINTS).latest() == 2


def test_an_event_named_on_the_command_line_runs(tmp_path):
    """`events=[pkg.module:Cls]`: `Cls()` runs between chunks as an event given to
    `purerl.run` does, its keys logged, its stop honoured."""
    result = run_cli("+env=cartpole", "ppo.num_steps=16", "ppo.num_epochs=1",
                     "ppo.num_minibatches=1", "network.hidden_sizes=[8,8]", "log.progress=false",
                     "total_timesteps=2048", "events=[custom_events:StopAtUpdateTwo]",
                     "eval.num_episodes=2", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["stopped_by"] == "StopAtUpdateTwo"
    assert [row["custom/seen"] for row in _rows(tmp_path)] == [1, 1]


@pytest.mark.parametrize("name, message", [
    ("custom_events:nowhere", "events=custom_events:nowhere: 'custom_events' has no callable"),
    ("nowhere", "events: 'nowhere' must name an Event class as pkg.module:Class"),
    ("custom_events:NeedsArguments", r"events=custom_events:NeedsArguments: NeedsArguments\(\) "
                                     "failed: .*missing 1 required positional argument"),
    ("custom_events:NotAnEvent", r"NotAnEvent\(\) made a NotAnEvent, not a purerl.Event"),
])
def test_an_event_that_cannot_be_made_is_refused_before_training(name, message):
    with pytest.raises(ConfigError, match=message):
        preflight(["+env=cartpole", f"events=[{name}]"])


def test_purerl_run_shows_the_command_lines_log(tmp_path, cache, capsys, monkeypatch):
    """With no logging set up (pytest's handlers kept apart), `purerl.run` shows the log's
    lines and the progress bar on stderr as the command line does; `console=False` and
    `log.progress=false` show nothing, and nothing is left on the logger."""
    logger = logging.getLogger("purerl")
    monkeypatch.setattr(logger, "propagate", False)
    purerl.run(_config(**{"log.progress": True}), tmp_path / "shown", cache=cache)
    shown = capsys.readouterr().err
    assert "[purerl][INFO] - update 8/8 | env steps" in shown
    assert "[purerl][INFO] - final return" in shown and "512/512" in shown  # the bar's end
    purerl.run(_config(), tmp_path / "quiet", cache=cache, console=False)
    assert "update" not in capsys.readouterr().err
    assert not logger.handlers and logger.level == logging.NOTSET


def test_stop_at_return_after_an_evaluation(tmp_path, cache):
    """With evaluations every 2 updates, only an evaluation's mean return counts: never
    reached, the run completes; reached, it stops at that evaluation."""
    never = purerl.run(_config(**{"eval.every": 2, "stop_at_return": 1e9}), tmp_path / "never",
                       cache=cache)
    assert never["status"] == "completed" and never["updates"] == 8
    summary = purerl.run(_config(**{"eval.every": 2, "stop_at_return": 1.0}), tmp_path / "met",
                         cache=cache)
    assert summary["status"] == "stopped" and summary["updates"] == 2
    assert summary["stopped_by"] == "stop_at_return"


class ChunkSizes(Event):
    """Records how many updates each chunk ran."""

    def __init__(self):
        self.sizes = []

    def handle(self, run, chunk):
        self.sizes.append(run.update - chunk.previous)


def test_chunk_updates_fit_chunk_s_at_the_last_chunks_pace():
    """10 updates in 5 s: 60 fit in 30 s, cut to the room; a slow update still runs alone; a
    chunk too quick to time fills the room."""
    from purerl.runs.runner import chunk_updates

    assert chunk_updates(10, 5.0, 30.0, 1000) == 60
    assert chunk_updates(10, 5.0, 30.0, 50) == 50
    assert chunk_updates(1, 100.0, 30.0, 50) == 1
    assert chunk_updates(3, 0.0, 30.0, 50) == 50


def test_a_chunk_ends_by_chunk_s_or_at_the_next_time_based_checkpoint():
    """chunk_s=30: a checkpoint every 600 s, the last 590 s ago, leaves 10 s; one due after
    this chunk leaves chunk_s; every 3 s, 3; none (every_s=0), chunk_s."""
    import dataclasses

    from purerl.runs.runner import chunk_time_budget

    config = dataclasses.replace(_config(), chunk_s=30.0)
    every = lambda seconds: dataclasses.replace(  # noqa: E731
        config, checkpoint=dataclasses.replace(config.checkpoint, every_s=seconds))
    assert chunk_time_budget(every(600.0), 590.0, due=False) == 10.0
    assert chunk_time_budget(every(600.0), 601.0, due=True) == 30.0
    assert chunk_time_budget(every(3.0), 3.5, due=True) == 3.0
    assert chunk_time_budget(every(0.0), 1e6, due=False) == 30.0


def test_chunks_last_at_most_chunk_s_and_leave_the_result_as_it_was(tmp_path, cache):
    """200 updates, room for 4 per chunk (1/50 of the run): the first chunk runs one update,
    then as many as fit in chunk_s: with chunk_s tiny every chunk is one update, with chunk_s
    huge the room; the metrics are the same whatever the chunks."""
    import dataclasses

    config = _config(**{"total_timesteps": 64 * 200, "checkpoint.every": 0})
    rows, sizes = [], []
    for name, chunk_s in (("tiny", 1e-9), ("huge", 1e9)):
        sizer = ChunkSizes()
        purerl.run(dataclasses.replace(config, chunk_s=chunk_s), tmp_path / name,
                   events=[sizer], cache=cache)
        sizes.append(sizer.sizes)
        rows.append(_rows(tmp_path / name))
    assert sizes == [[1] * 200, [1] + [4] * 49 + [3]]
    assert rows[0] == rows[1] and len(rows[0]) == 200


class RaiseOnNonfinite(Event):
    """Raises after the chunk whose updates went non-finite."""

    def handle(self, run, chunk):
        if chunk.nonfinite:
            raise RuntimeError("an event failed after a non-finite update")


def test_a_state_that_went_nonfinite_is_never_saved(tmp_path):
    """NaNChain's reward turns NaN (with seed 1 first at update 18); an event raises on that
    chunk: what trained before is kept, but the chunk's state, which went non-finite, is not
    saved under the last good update: the newest checkpoint is the periodic one before it, and
    it holds finite params and optimizer state."""
    import jax

    config = _config(**{"env.name": "custom_envs:NaNChain", "seed": 1, "total_timesteps": 6400,
                        "checkpoint.every": 5})
    with pytest.raises(RuntimeError, match="an event failed after a non-finite update"):
        purerl.run(config, tmp_path, events=[RaiseOnNonfinite()])
    checkpoints = Checkpoints(tmp_path / CHECKPOINTS)
    bad = len(_rows(tmp_path)) + 1
    assert bad < config.num_updates and checkpoints.latest() == (bad - 1) // 5 * 5
    saved = restore_run(tmp_path)
    assert saved.update == checkpoints.latest()
    for leaf in jax.tree.leaves((saved.state.params, saved.state.opt_state)):
        assert np.isfinite(np.asarray(leaf)).all()
