"""What happens between chunks of updates: the `Event` API and the run as events see it.

After each chunk the run's events run in order, each when `due`. An event reads the chunk's
metrics rows and the run's state, may add keys to the rows (the Log event writes them), and may
end the run with `Run.request_stop`. `purerl.run(config, run_dir, events=[...])` adds a user's
events after the evaluation and before the log, so that they see the evaluation's result and
what they add to the rows is logged. The built-in events are in `purerl.runs.builtin_events`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Protocol

from purerl.config import Config
from purerl.version import __version__

if TYPE_CHECKING:  # for the types alone: importing them would import JAX
    import jax

    from purerl.algos.algorithm import RunnerState
    from purerl.logging.history import RunHistory
    from purerl.logging.progress import ProgressBar
    from purerl.runs.compiling import Programs
    from purerl.storage.checkpoint import Checkpoints

log = logging.getLogger("purerl")


class MetricsWriter(Protocol):
    """Where the log event writes metrics rows: metrics.jsonl, TensorBoard, W&B
    (`purerl.logging.sinks`)."""

    def write(self, rows: List[Dict]) -> None:
        """Writes metrics rows, one dict per update.

        Args:
            rows: the rows to write, in update order; may be empty.
        """

    def close(self) -> None:
        """Flushes and closes the writer."""


@dataclass
class Run:
    """A run in progress, as the events between chunks read and change it.

    An event that changes the state (PBT) assigns `state`; one that ends the run calls
    `request_stop`. M is the run's members (`Config.num_members`).

    Attributes:
        config: the run's settings.
        run_dir: the run directory.
        programs: the compiled programs (`programs.evaluate(params, obs_stats, keys)`).
        num_devices: the devices the run's program is mapped over.
        key: the run's PRNG key (evaluation and PBT draw from streams of it).
        checkpoints: the run's checkpoints (`checkpoints/`).
        best: the best policy's checkpoints (`checkpoints/best/`), None without
            `checkpoint.best`.
        plan: the name of the execution plan that runs (`purerl.plan.plan_name`): "plain",
            "cpu" or "custom".
        state: the `RunnerState`, leaves `[M, ...]` over the members; None until the run
            opens.
        history: every update's returns and the evaluations so far; None until the run opens.
        update: the updates done, the chunk's last.
        first_update: the update this process started from (a resumed run's checkpoint).
        writers: the metrics writers (metrics.jsonl, TensorBoard, W&B); none in a process
            that writes no files.
        bar: the progress bar; None until the run opens.
        train_s: seconds spent training (running chunks) in this process.
        checkpoint_s: seconds spent writing checkpoints.
        last_checkpoint: `time.monotonic()` of the last checkpoint (or of the start).
        status: "completed" (so far), "stopped" (an event asked), "interrupted" (Ctrl-C),
            "preempted" (SIGTERM, SIGUSR1) or "nonfinite" (the NaN guard).
        failure: what was non-finite where, when `status` is "nonfinite".
        stopped_by: the name of the event that ended the run early, or None.
        stop_signal: the signal that ended the run early (`purerl.runs.signals`), 0: none.
    """

    # What the run is: set when it starts.
    config: Config
    run_dir: Path
    programs: Programs
    num_devices: int
    key: jax.Array
    checkpoints: Checkpoints
    best: Optional[Checkpoints]
    plan: str
    # Where it is: set when it opens, then after each chunk.
    state: Optional[RunnerState] = None
    history: Optional[RunHistory] = None
    update: int = 0
    first_update: int = 0
    # Its outputs.
    writers: List[MetricsWriter] = field(default_factory=list)
    bar: Optional[ProgressBar] = None
    # Its timings.
    train_s: float = 0.0
    checkpoint_s: float = 0.0
    last_checkpoint: float = 0.0
    # How it ends.
    status: str = "completed"
    failure: str = ""
    stopped_by: Optional[str] = None
    stop_signal: int = 0

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
        """Env steps per second over all members (seeds), of the updates this process ran.

        Returns:
            Steps per second of training time (`train_s`); 0 before any update ran here.
        """
        steps = (self.update - self.first_update) * self.config.batch_size * self.config.num_members
        return steps / max(self.train_s, 1e-9)

    def record(self) -> Dict:
        """The host's record saved with a checkpoint.

        Returns:
            A JSON dict: `version`, `config` (`config_record`), `plan`, `devices`,
                `processes`, `update` and `history` (`RunHistory.to_record`).
        """
        # JAX and orbax's module (0.5 s): the Event API a user's events import stays light
        import jax

        from purerl.storage.checkpoint import config_record

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
        stop_signal: the stop signal that came during the chunk (`purerl.runs.signals`), 0 when
            none did; the same in every process.
        nonfinite: the NaN guard's bits of the first bad update; 0 when all were good.
        checkpoint_due: `checkpoint.every_s` seconds passed since the last checkpoint.
        evaluated: the evaluation event ran after it.
        failed: an event raised after it; what trained is kept, then the error propagates.
    """

    previous: int  # updates done before the chunk
    rows: List[Dict]  # metrics rows of the good updates, as metrics.jsonl has them
    # The stop signal that came during the chunk (`purerl.runs.signals`), 0 when none did; read
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
    """An event every `every` updates (0: only at the run's end) falls on this update.

    Args:
        every: the updates between the event's turns.
        run: the run, `run.update` the chunk's last update.

    Returns:
        True at the run's end (`run.ending`) or when `every` divides `run.update`.
    """
    return run.ending or (every > 0 and run.update % every == 0)
