"""What happens between chunks of updates: the `Event` API, the run as events see it, and the
built-in events (evaluate, log, the NaN guard, progress, PBT generations, checkpoints, plots,
a stop signal, `stop_at_return`).

After each chunk the run's events run in order, each when `due`. An event reads the chunk's
metrics rows and the run's state, may add keys to the rows (the Log event writes them), and may
end the run with `Run.request_stop`. `purerl.run(config, run_dir, events=[...])` adds a user's
events after the evaluation and before the log, so that they see the evaluation's result and
what they add to the rows is logged.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from purerl.config import Config
from purerl.version import __version__

log = logging.getLogger("purerl")
PROGRESS_LINES = 10  # about this many progress lines per run
PBT_LOG = "pbt.jsonl"  # a PBT run's generations: who copied whom, the new hyperparameters


@dataclass
class Run:
    """A run in progress, as the events between chunks read and change it.

    An event that changes the state (PBT) assigns `state`; one that ends the run calls
    `request_stop`. M is the run's members (`Config.num_members`).

    Attributes:
        config: the run's settings.
        run_dir: the run directory.
        programs: the compiled programs (`programs.evaluate(params, obs_stats, keys)`).
        key: the run's PRNG key.
        state: the `RunnerState`, leaves `[M, ...]` over the members.
        history: the `RunHistory`: every update's returns and the evaluations so far.
        plan: the name of the execution plan that runs (`purerl.plan.plan_name`).
        update: the updates done, the chunk's last.
        status: "completed" (so far), "stopped" (an event asked), "interrupted" (Ctrl-C),
            "preempted" (SIGTERM, SIGUSR1) or "nonfinite" (the NaN guard).
        stopped_by: the name of the event that ended the run early, or None.
    """

    config: Config
    run_dir: Path
    programs: Any  # purerl.compiling.Programs
    num_devices: int
    key: Any  # the run's PRNG key (evaluation draws from a stream of it)
    checkpoints: Any  # purerl.checkpoint.Checkpoints
    best: Any  # Checkpoints of checkpoints/best/, or None
    plan: str  # the execution plan's name (`purerl.plan.plan_name`): "plain", "cpu" or "custom"
    state: Any = None  # the RunnerState
    history: Any = None  # purerl.logging RunHistory
    update: int = 0  # updates done
    first_update: int = 0  # where this process started: a resumed run's checkpoint
    writers: List = field(default_factory=list)  # metrics.jsonl, TensorBoard, W&B
    bar: Any = None  # the progress bar
    train_s: float = 0.0
    checkpoint_s: float = 0.0  # seconds spent writing checkpoints
    last_checkpoint: float = 0.0  # `time.monotonic()` of the last checkpoint (or the start)
    # completed (so far) | interrupted (Ctrl-C) | preempted (SIGTERM, SIGUSR1) | nonfinite |
    # stopped (an event asked)
    status: str = "completed"
    failure: str = ""  # what was non-finite where, when status is nonfinite
    stopped_by: Optional[str] = None  # the event that ended the run early
    stop_signal: int = 0  # the signal that ended the run early (`purerl.signals`), 0: none

    @property
    def env_steps(self) -> int:
        """Env steps per member so far."""
        return self.update * self.config.batch_size

    @property
    def ending(self) -> bool:
        """Whether the run ends at this update: its last, or an event asked it to stop."""
        return self.update == self.config.num_updates or self.stopped_by is not None

    def request_stop(self, by: str) -> None:
        """Ends the run at this update, cleanly: the events still due run (the final
        evaluation, the log, the checkpoint), summary.json says status "stopped" and
        `stopped_by`, and the run can be resumed. The first request counts.

        Args:
            by: who asked, as summary.json's `stopped_by` gives it (an event's `name`).
        """
        if self.stopped_by is None:
            self.stopped_by = by
            self.status = "stopped"
            log.info("stopped by %s at update %d", by, self.update)

    def sps(self) -> float:
        """Env steps per second over all members (seeds), of the updates this process ran."""
        steps = (self.update - self.first_update) * self.config.batch_size * self.config.num_members
        return steps / max(self.train_s, 1e-9)

    def record(self) -> Dict:
        """The host's record saved with a checkpoint."""
        import jax

        from purerl.checkpoint import config_record

        return {"version": __version__, "config": config_record(self.config),
                "plan": self.plan, "devices": self.num_devices,
                "processes": jax.process_count(),
                "update": self.update, "history": self.history.to_record()}


@dataclass
class Chunk:
    """What one chunk of updates brought, for the events to read and extend.

    Attributes:
        previous: the updates done before the chunk.
        rows: the metrics rows of its good updates (those before a non-finite one), one dict
            per update as metrics.jsonl has them; an event may add keys to them (the log
            event writes them after the caller's events).
        stop_signal: the stop signal that came during the chunk (`purerl.signals`), 0 when
            none did; the same in every process.
        nonfinite: the NaN guard's bits of the first bad update; 0 when all were good.
        checkpoint_due: `checkpoint.every_s` seconds passed since the last checkpoint.
        evaluated: the evaluation event ran after it.
        failed: an event raised after it; what trained is kept, then the error propagates.
    """

    previous: int  # updates done before the chunk
    rows: List[Dict]  # metrics rows of the good updates, as metrics.jsonl has them
    # The stop signal that came during the chunk (`purerl.signals`), 0 when none did; read
    # once for every process, so that the save and the stop agree
    stop_signal: int
    nonfinite: int  # the NaN guard's bits of the first bad update; 0 when all were good
    checkpoint_due: bool = False  # `checkpoint.every_s` seconds passed since the last one
    evaluated: bool = False  # the evaluation event ran after it
    failed: bool = False  # an event raised after it: what trained is kept, then it re-raises

    @property
    def stop_requested(self) -> bool:
        """A stop signal came: the run ends after this chunk, its checkpoint written."""
        return self.stop_signal != 0


class Event:
    """Something done between chunks of updates; subclass it and define `handle`.

    After each chunk, the run's events run in order, each when `due`. Once one ends the run
    (the NaN guard, Ctrl-C), the rest wait; after `Run.request_stop`, the events still due
    run, and the earlier ones due at a run's end (the final evaluation) run then too. When
    one raises in a single process, those after it that keep what trained (`keeps_work`: the
    log, the checkpoint) still run. Pass events to `run(config, run_dir, events=[...])`.

    Attributes:
        every: the updates between a periodic event's turns: above 0, it is due on every
            `every`-th update and at the run's end (the default `due`), and chunks end on its
            updates; 0 (the default): `due` decides after each chunk (by default, always).
        keeps_work: the event keeps what trained (the log, the checkpoint), so it still runs
            after an earlier event raised.
    """

    every = 0
    keeps_work = False

    @property
    def name(self) -> str:
        """The event's name, as `summary.json`'s `stopped_by` gives it."""
        return type(self).__name__

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether to handle the chunk that just ended.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`; by default, on every `every`-th update and at the
                run's end when `every` is above 0, else always.
        """
        return periodic(self.every, run) if self.every > 0 else True

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Acts on the chunk that just ended: reads `chunk.rows` and `run`, may add keys to
        the rows, and may end the run with `run.request_stop(self.name)`.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Raises:
            NotImplementedError: a subclass did not define it.
        """
        raise NotImplementedError


def periodic(every: int, run: Run) -> bool:
    """An event every `every` updates (0: only at the run's end) falls on this update."""
    return run.ending or (every > 0 and run.update % every == 0)


class Evaluate(Event):
    """Evaluation episodes every `eval.every` updates and at the end; keeps the best."""

    def __init__(self, config: Config):
        self.every = config.eval.every

    def due(self, run, chunk):
        return not chunk.nonfinite and not chunk.evaluated and periodic(self.every, run)

    def handle(self, run, chunk):
        import jax
        import numpy as np

        from purerl.compiling import EVAL_STREAM, eval_keys
        from purerl.distributed import to_host
        from purerl.logging.sinks import eval_key, json_number, per_member_key
        from purerl.sweep import is_sweep

        config, key = run.config, run.key
        update_key = jax.random.fold_in(jax.random.fold_in(key, EVAL_STREAM), run.update)
        result = run.programs.evaluate(run.state.params, run.state.normalizer.obs,
                                       eval_keys(config, update_key))
        members = np.asarray(to_host(result).episode_return)  # [M, temperatures]
        temperatures = [str(float(t)) for t in config.eval.temperatures]
        returns = {t: json_number(v) for t, v in zip(temperatures, members.mean(axis=0))}
        per_member = {t: [json_number(v) for v in members[:, i]]
                      for i, t in enumerate(temperatures)}
        previous_best = run.history.best_eval()
        entry = {"update": run.update, "env_steps": run.env_steps, "returns": returns}
        if is_sweep(config):
            entry["per_member"] = per_member
        run.history.evals.append(entry)
        if run.best is not None and run.history.best_eval() != previous_best:
            run.best.save(run.update, run.state, run.record())
        chunk.rows[-1].update({eval_key(t): v for t, v in returns.items()})
        chunk.rows[-1].update({per_member_key(eval_key(t)): v for t, v in per_member.items()})
        chunk.evaluated = True


class StopAtReturn(Event):
    """Ends the run once the mean return over the members reaches `threshold` (as
    Stable-Baselines3's `StopTrainingOnRewardThreshold`): with evaluations every `eval.every`
    updates, after the first whose mean return at the first temperature is at least it;
    without, after the first logged update (every `log_every`-th) whose mean episode return
    is (chunks then end on logged updates)."""

    name = "stop_at_return"

    def __init__(self, threshold: float, config: Config):
        self.threshold = threshold
        self.by_evaluation = config.eval.every > 0
        self.every = config.eval.every if self.by_evaluation else config.log_every

    def due(self, run, chunk):
        return (not chunk.nonfinite and bool(chunk.rows)
                and (chunk.evaluated if self.by_evaluation else run.update % self.every == 0))

    def handle(self, run, chunk):
        if self.by_evaluation:
            value = next(iter(run.history.evals[-1]["returns"].values()))
        else:
            value = chunk.rows[-1]["episode_return"]
        if value is not None and value >= self.threshold:
            log.info("mean return %.4g >= stop_at_return=%g", value, self.threshold)
            run.request_stop(self.name)


class Log(Event):
    """Writes every `log_every`-th row, the last update's and the evaluated one."""

    keeps_work = True

    def handle(self, run, chunk):
        config = run.config
        logged = [r for r in chunk.rows if r["update"] % config.log_every == 0
                  or (run.ending and r is chunk.rows[-1])
                  or (chunk.evaluated and r is chunk.rows[-1])]
        for writer in run.writers:
            writer.write(logged)


class NonfiniteGuard(Event):
    """Stops the run after a non-finite update (what came before it is logged and kept);
    `names(bits)` names what was non-finite."""

    def __init__(self, names: Callable[[int], List[str]]):
        self.names = names

    def due(self, run, chunk):
        return chunk.nonfinite != 0

    def handle(self, run, chunk):
        run.status = "nonfinite"
        run.failure = (f"non-finite {', '.join(self.names(chunk.nonfinite))} at update "
                       f"{run.update + 1}")


class Progress(Event):
    """The progress bar, and about PROGRESS_LINES progress lines per run in the log."""

    def __init__(self, config: Config):
        self.line_every = math.ceil(config.num_updates / PROGRESS_LINES)
        self.noted = False  # whether the log has said what the earlier-return marker means

    def handle(self, run, chunk):
        from purerl.logging.progress import EARLIER_NOTE, progress_line

        sps, latest = run.sps(), chunk.rows[-1]
        own, earlier = latest["episode_return"], run.history.latest_return()
        run.bar.update(run.env_steps, sps, own if own is not None else earlier,
                       earlier=own is None and earlier is not None)
        if (run.update // self.line_every > chunk.previous // self.line_every or run.ending):
            log.info(progress_line(latest, run.config.num_updates, sps, earlier))
            if own is None and earlier is not None and not self.noted:
                log.info(EARLIER_NOTE)
                self.noted = True


class Generation(Event):
    """Population-based training: a generation of exploit and explore every `pbt.every`
    updates (not at the run's end), compiled; its line in pbt.jsonl and pbt.png redrawn."""

    def __init__(self, config: Config):
        self.every = config.pbt.every

    def due(self, run, chunk):
        return (self.every > 0 and not chunk.nonfinite and run.update % self.every == 0
                and not run.ending)

    def handle(self, run, chunk):
        import jax
        import numpy as np

        from purerl.distributed import to_host, writes_files
        from purerl.logging.plots import plot_pbt
        from purerl.pbt import PBT_STREAM, generation_fitness, generation_row

        config, history, generation = run.config, run.history, run.update // self.every
        window = slice(run.update - self.every, run.update)
        fitness = generation_fitness(history.return_sum[:, window], history.count[:, window])
        key = jax.random.fold_in(jax.random.fold_in(run.key, PBT_STREAM), generation)
        run.state, source = run.programs.pbt(run.state, fitness, key)
        names = config.pbt.evolving(config.sweep)
        source, hparams = to_host(  # one gather from every process
            (source, {name: getattr(run.state.hparams, name) for name in names}))
        row = generation_row(run.update, generation, fitness, np.asarray(source), hparams, names)
        if writes_files():
            with (run.run_dir / PBT_LOG).open("a") as file:
                file.write(json.dumps(row) + "\n")
            plot_pbt(run.run_dir / "pbt.png", pbt_rows(run.run_dir), names,
                     title=config.env.name)
        log.info("generation %d at update %d: %d member(s) copied others", generation,
                 run.update, len(row["copies"]))


def pbt_rows(run_dir: Path) -> List[Dict]:
    """The generations of a run directory's pbt.jsonl so far."""
    path = run_dir / PBT_LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Checkpoint(Event):
    """A checkpoint every `checkpoint.every` updates and after `checkpoint.every_s` seconds,
    at the end, when a stop signal came, and after an event failed; never after a chunk that
    went non-finite (its state is past the last good update)."""

    keeps_work = True

    def __init__(self, config: Config):
        self.every = config.checkpoint.every

    def due(self, run, chunk):
        return not chunk.nonfinite and (periodic(self.every, run) or chunk.checkpoint_due
                                         or chunk.stop_requested or chunk.failed)

    def handle(self, run, chunk):
        tick = time.monotonic()
        run.checkpoints.save(run.update, run.state, run.record())
        run.last_checkpoint = time.monotonic()
        run.checkpoint_s += run.last_checkpoint - tick


class Plot(Event):
    """Redraws learning_curve.png after each evaluation but the last (the run's end draws
    the final one)."""

    def due(self, run, chunk):
        from purerl.distributed import writes_files

        return chunk.evaluated and not run.ending and writes_files()

    def handle(self, run, chunk):
        plot_learning_curve(run)


def plot_learning_curve(run: Run) -> None:
    """Draws the run's learning_curve.png: every update's mean return, the evaluations."""
    import numpy as np

    from purerl.logging import plots
    from purerl.sweep import is_sweep, point_labels

    history, config = run.history, run.config
    returns = history.returns()
    if config.pbt.every:  # members change hyperparameters: a curve per member, as in pbt.png
        groups = [f"member {m}" for m in range(returns.shape[0])]
    else:
        groups = point_labels(config) if is_sweep(config) else None
    plots.plot_learning_curve(run.run_dir / "learning_curve.png",
                              np.arange(1, history.num_updates + 1) * config.batch_size,
                              returns, history.eval_points(), title=config.env.name,
                              groups=groups)


class StopSignal(Event):
    """Stops the run at the chunk's end after a stop signal (once the checkpoint is saved):
    status "interrupted" after Ctrl-C, "preempted" after SIGTERM or SIGUSR1."""

    def due(self, run, chunk):
        return chunk.stop_requested and not run.ending

    def handle(self, run, chunk):
        from purerl.signals import status_of

        run.status = status_of(chunk.stop_signal)
        run.stop_signal = chunk.stop_signal


def default_events(config: Config, user_events=()) -> List[Event]:
    """The events between chunks, in the order they run: evaluation, `stop_at_return` when
    set, `user_events`, then the log, the NaN guard, progress, PBT, checkpoint, plot and the
    stop signal."""
    from purerl.learner import nonfinite_names

    stop = [] if config.stop_at_return is None else [StopAtReturn(config.stop_at_return, config)]
    return [Evaluate(config), *stop, *user_events, Log(), NonfiniteGuard(nonfinite_names),
            Progress(config), Generation(config), Checkpoint(config), Plot(), StopSignal()]
