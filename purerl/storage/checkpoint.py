"""Orbax checkpoints of a whole run: the runner state plus the host's record of the run.

A checkpoint is one orbax step directory `checkpoints/<update>/` with two items: `state`, the
`RunnerState` (params, optimizer state, env states, normalization statistics, typed PRNG keys,
update counter), and `record`, JSON: the config, the per-seed episode history and the eval
results so far. Orbax writes into a temporary directory and renames it only once complete, so a
process killed while saving leaves the previous checkpoint as the newest usable one, and the
run that owns the directory removes such temporary directories. A checkpoint damaged after it
was written (truncated or missing files, on a node lost mid-copy) is skipped with a warning when
restoring, and the newest intact one before it is used. Orbax is imported on first use: a new
run needs it only when it saves its first checkpoint. Whether a config continues a saved run,
and a run directory's checkpoint restored into the program its config describes:
`purerl.storage.restoring`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import jax

from purerl.config import Config, ConfigError
from purerl.storage.saved_layouts import saved_layouts
from purerl.storage.write_errors import WriteError, quiet_after_failure, writes_to
from purerl.version import __version__

log = logging.getLogger("purerl")
CHECKPOINTS = "checkpoints"
TEMPORARY = ".orbax-checkpoint-tmp"  # in the name of a save's directory until it is complete
BEST = "best"  # checkpoints/best/: the best policy by eval return, when checkpoint.best

def import_orbax():
    """orbax.checkpoint, imported at its first use (it takes a while).

    Returns:
        The `orbax.checkpoint` module.
    """
    # orbax (0.7 s): imported while the programs compile (`compiling.import_writers`)
    import orbax.checkpoint as ocp

    return ocp


class Checkpoints:
    """The checkpoints in one directory, the newest `keep` of them kept. `owner`: this
    process's run writes them (it creates the directory and removes the temporary
    directories of interrupted saves); otherwise it only reads them."""

    def __init__(self, directory: Path, keep: Optional[int] = None, owner: bool = False):
        self.directory = Path(directory).resolve()
        self._keep = keep
        self._owner = owner
        self._orbax_manager = None

    @property
    def _manager(self):
        """Orbax's manager of the directory, made (and the directory created) on first use."""
        if self._orbax_manager is None:
            ocp = import_orbax()
            if self._owner and jax.process_index() == 0:
                for interrupted in self.directory.glob(f"*{TEMPORARY}*"):
                    shutil.rmtree(interrupted, ignore_errors=True)
            options = ocp.CheckpointManagerOptions(
                max_to_keep=self._keep, create=self._owner, enable_async_checkpointing=False)
            self._orbax_manager = ocp.CheckpointManager(self.directory, options=options)
        return self._orbax_manager

    def save(self, update: int, state: Any, record: Dict) -> None:
        """Writes `state` and `record` as the checkpoint of `update` (again, if it exists);
        a failed write raises `WriteError`, the checkpoints before intact.

        Args:
            update: the update the checkpoint is of, its step directory's name.
            state: the `RunnerState`, leaves `[S, ...]` (S members).
            record: the JSON record of the run (`purerl.runs.events.Run.record`).

        Raises:
            purerl.storage.write_errors.WriteError: a write failed, named by the checkpoint's
                directory.
            RuntimeError: orbax saved nothing.
        """
        ocp = import_orbax()
        try:
            with quiet_after_failure(), writes_to(self.directory):
                if update in self._manager.all_steps():
                    self._manager.delete(update)
                saved = self._manager.save(update, force=True, args=ocp.args.Composite(
                    state=ocp.args.StandardSave(state), record=ocp.args.JsonSave(record)))
                self._manager.wait_until_finished()
        except WriteError as error:  # named by the checkpoint, not orbax's temporary file
            raise WriteError(self.directory / str(update), error.reason) from None
        if not saved:
            raise RuntimeError(f"orbax did not save the checkpoint of update {update} in "
                               f"{self.directory}")

    def delete_after(self, update: int) -> None:
        """Deletes the checkpoints of updates after `update`.

        Args:
            update: the last update whose checkpoint stays.
        """
        for step in self._manager.all_steps():
            if step > update:
                self._manager.delete(step)

    def latest(self) -> Optional[int]:
        """The update of the newest complete checkpoint, or None.

        Returns:
            The newest step, None when the directory does not exist or holds none.
        """
        if self._orbax_manager is None and not self.directory.is_dir():
            return None
        self._manager.reload()
        return self._manager.latest_step()

    def restore(self, update: int, like: Any) -> Tuple[Any, Dict]:
        """(state, record) of `update`; `like` is a state (or its abstract shapes and
        shardings) with the structure to restore into, on whichever devices it is. A state
        saved before a field that `like` holds as None existed (`HyperParams.extra`) restores
        with that field None; one of purerl 0.2.0's CPU plan, whose optimizer state held the
        param-shaped trees raveled into `[S, P]` vectors, restores in the tree layout (purerl's
        checkpoints hold it whatever plan ran); any other difference of structure raises
        ConfigError naming the purerl version that wrote the checkpoint.

        Args:
            update: the checkpoint's update.
            like: the state to restore into, leaves `[S, ...]` (arrays or `jax.ShapeDtypeStruct`s
                with shardings).

        Returns:
            `(state, record)`: the state in `like`'s structure, shapes and shardings, and
                the record as saved.

        Raises:
            ConfigError: the saved state has another structure than `like`.
        """
        ocp = import_orbax()
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        first_mismatch = None
        for layout, to_like in saved_layouts(abstract):
            try:
                state, record = self._restore_layout(update, layout)
                return to_like(state), record
            except ValueError as error:
                mismatch = _structure_mismatch(error)
                if mismatch is None:
                    raise
                first_mismatch = first_mismatch or mismatch
        version = self.restore_record(update).get("version", "before 0.2.0")
        raise ConfigError(
            f"{self.directory / str(update)}: its state has another structure than this run's "
            f"({first_mismatch}): written by purerl {version}, read by purerl {__version__}, or "
            "another network or env") from None

    def _restore_layout(self, update: int, layout: Any) -> Tuple[Any, Dict]:
        """(state, record) of `update` restored into `layout`, or into it without the None
        fields that the saved state lacks (then refilled as None); raises orbax's ValueError
        when neither fits."""
        try:
            return self._restore(update, layout)
        except ValueError as error:
            mismatch = _structure_mismatch(error)
            paths = _mismatched_paths(mismatch) if mismatch is not None else []
            if not paths:
                raise
        state, record = self._restore(update, _without(layout, paths))
        return _refilled(layout, state), record

    def restore_intact(self, update: int, like: Any) -> Tuple[int, Any, Dict]:
        """(update, state, record) of the newest checkpoint up to `update` that restores (as
        `restore`); one that does not (damaged files) is skipped with a warning naming it and
        the error. Raises ConfigError when none does.

        Args:
            update: the newest update to consider.
            like: the state to restore into, as `restore` takes it.

        Returns:
            `(update, state, record)` of the checkpoint restored.

        Raises:
            ConfigError: no checkpoint up to `update` restores, or one has another structure.
        """
        return self._newest_intact(update, lambda step: (step, *self.restore(step, like)))

    def record_intact(self, update: int) -> Tuple[int, Dict]:
        """(update, record) of the newest checkpoint up to `update` whose record reads, as
        `restore_intact` skips the others.

        Args:
            update: the newest update to consider.

        Returns:
            `(update, record)` of the checkpoint read.

        Raises:
            ConfigError: no checkpoint up to `update` has a record that reads.
        """
        return self._newest_intact(update, lambda step: (step, self.restore_record(step)))

    def _newest_intact(self, update: int, restore):
        steps = sorted((step for step in self._manager.all_steps() if step <= update),
                       reverse=True)
        for step in steps:
            try:
                with _unraisable_quiet():
                    return restore(step)
            except ConfigError:
                raise
            except Exception as error:  # orbax's and tensorstore's errors vary by the damage
                log.warning("%s: skipped, it does not restore (%s)", self.directory / str(step),
                            _first_line(error))
        raise ConfigError(f"{self.directory}: no intact checkpoint (of {len(steps)} up to "
                          f"update {update}, none restores)")

    def _restore(self, update: int, abstract: Any) -> Tuple[Any, Dict]:
        ocp = import_orbax()
        restored = self._manager.restore(update, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), record=ocp.args.JsonRestore()))
        return restored["state"], restored["record"]

    def restore_record(self, update: int) -> Dict:
        """The record of `update`'s checkpoint, its state left unread.

        Args:
            update: the checkpoint's update.

        Returns:
            The record, JSON as saved (`purerl.runs.events.Run.record`): `config`, `update`,
                `history`, ...
        """
        ocp = import_orbax()
        return self._manager.restore(update, args=ocp.args.Composite(
            record=ocp.args.JsonRestore()))["record"]

    def close(self) -> None:
        """Closes orbax's manager, if one was made."""
        if self._orbax_manager is not None:
            self._orbax_manager.close()


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200] if text else ''}"


@contextlib.contextmanager
def _unraisable_quiet():
    """Orbax's reads of a damaged checkpoint leave coroutines whose errors Python would print
    as tracebacks when it collects them: collected here, silently."""
    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        yield
    finally:
        gc.collect()
        sys.unraisablehook = previous


def _structure_mismatch(error: ValueError) -> Optional[str]:
    """What differs, in one line, when orbax's `error` says the saved state has another tree
    structure than the one to restore into (its two wordings); None for any other error."""
    text = str(error)
    if text.startswith("Structure mismatch"):
        return text.split(". ")[0]
    if "tree structures do not match" in text:
        paths = [line[:-1] for line in text.splitlines()[1:]
                 if line.endswith(":") and not line.startswith(" ")]
        return "it differs at " + ", ".join(paths)
    return None


def _mismatched_paths(mismatch: str) -> List[str]:
    """The dotted paths that `_structure_mismatch`'s line names (none in orbax's first
    wording)."""
    prefix = "it differs at "
    return mismatch[len(prefix):].split(", ") if mismatch.startswith(prefix) else []


def _is_record(node: Any) -> bool:
    return isinstance(node, tuple) and hasattr(node, "_fields")


def _without(tree: Any, paths: List[str]) -> Any:
    """`tree` with the NamedTuple fields at `paths` that are None left out (those NamedTuples
    as dicts of their other fields)."""
    def strip(node, prefix):
        if _is_record(node):
            return {name: strip(value, f"{prefix}{name}.") for name, value in node._asdict().items()
                    if not (value is None and f"{prefix}{name}" in paths)}
        if isinstance(node, dict):
            return {key: strip(value, f"{prefix}{key}.") for key, value in node.items()}
        return node

    return strip(tree, "")


def _refilled(like: Any, restored: Any) -> Any:
    """`restored` (of `_without(like, ...)`'s structure) in `like`'s, the left-out fields
    None."""
    if _is_record(like):
        return type(like)(**{name: None if value is None else _refilled(value, restored[name])
                             for name, value in like._asdict().items()})
    if isinstance(like, dict):
        return {key: _refilled(value, restored[key]) for key, value in like.items()}
    return restored


def config_record(config: Config) -> Dict:
    """The config as saved in a checkpoint's record.

    Args:
        config: the run's config.

    Returns:
        `dataclasses.asdict(config)`: its settings as nested dicts.
    """
    return dataclasses.asdict(config)
