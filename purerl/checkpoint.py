"""Orbax checkpoints of a whole run: the runner state plus the host's record of the run.

A checkpoint is one orbax step directory `checkpoints/<update>/` with two items: `state`, the
`RunnerState` (params, optimizer state, env states, normalization statistics, typed PRNG keys,
update counter), and `record`, JSON: the config, the per-seed episode history and the eval
results so far. Orbax writes into a temporary directory and renames it only once complete, so a
process killed while saving leaves the previous checkpoint as the newest usable one, and the
run that owns the directory removes such temporary directories. A checkpoint damaged after it
was written (truncated or missing files, on a node lost mid-copy) is skipped with a warning when
restoring, and the newest intact one before it is used. Orbax is imported on first use: a new
run needs it only when it saves its first checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

import jax

from purerl.config import RESUMABLE_CHANGES, Config, ConfigError, flat_settings
from purerl.version import __version__
from purerl.write_errors import WriteError, quiet_after_failure, writes_to

log = logging.getLogger("purerl")
CHECKPOINTS = "checkpoints"
TEMPORARY = ".orbax-checkpoint-tmp"  # in the name of a save's directory until it is complete
BEST = "best"  # checkpoints/best/: the best policy by eval return, when checkpoint.best

def import_orbax():
    """orbax.checkpoint, imported at its first use (it takes a while)."""
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
        a failed write raises `WriteError`, the checkpoints before intact."""
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
        """Deletes the checkpoints of updates after `update`."""
        for step in self._manager.all_steps():
            if step > update:
                self._manager.delete(step)

    def latest(self) -> Optional[int]:
        """The update of the newest complete checkpoint, or None."""
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
        ConfigError naming the purerl version that wrote the checkpoint."""
        ocp = import_orbax()
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        first_mismatch = None
        for layout, to_like in _saved_layouts(abstract):
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
        the error. Raises ConfigError when none does."""
        return self._newest_intact(update, lambda step: (step, *self.restore(step, like)))

    def record_intact(self, update: int) -> Tuple[int, Dict]:
        """(update, record) of the newest checkpoint up to `update` whose record reads, as
        `restore_intact` skips the others."""
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
        ocp = import_orbax()
        return self._manager.restore(update, args=ocp.args.Composite(
            record=ocp.args.JsonRestore()))["record"]

    def close(self) -> None:
        if self._orbax_manager is not None:
            self._orbax_manager.close()


def _saved_layouts(abstract: Any) -> Iterator[Tuple[Any, Callable[[Any], Any]]]:
    """The layouts a saved state may have, each with the conversion of a state restored in it
    to `abstract`'s, the next made only when the one before did not fit: `abstract` itself,
    then (for a `RunnerState` whose optimizer state holds param-shaped trees) purerl 0.2.0's
    CPU-plan layout, those trees raveled into `[S, P]`."""
    from purerl.learner import ravel_like_params, unravel_like_params

    yield abstract, lambda state: state
    if not (_is_record(abstract) and hasattr(abstract, "opt_state")):
        return
    params, opt_state = abstract.params, abstract.opt_state
    flat = jax.eval_shape(lambda s, p: ravel_like_params(s, p, lead=1), opt_state, params)
    if jax.tree.structure(flat) == jax.tree.structure(opt_state):
        return
    sharding = jax.tree.leaves(params)[0].sharding  # the optimizer state's, as the params'
    flat = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), flat)
    as_tree = jax.jit(lambda saved: unravel_like_params(saved, opt_state, params, lead=1),
                      out_shardings=jax.tree.map(lambda x: x.sharding, opt_state))
    yield (abstract._replace(opt_state=flat),
           lambda state: state._replace(opt_state=as_tree(state.opt_state)))


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
    """The config as saved in a checkpoint's record."""
    return dataclasses.asdict(config)


def config_differences(saved: Dict, config: Config, ignore=RESUMABLE_CHANGES) -> List[str]:
    """`key: saved -> now` for every setting that differs, but those in `ignore`; a setting
    that the saved config lacks (added to purerl later) counts as its default."""
    old = flat_settings(config_record(_from_dict(Config, saved)))
    new = flat_settings(config_record(config))
    keys = sorted(k for k in set(old) | set(new) if k.split(".")[0] not in ignore)
    return [f"{k}={old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]


def check_resumable(record: Dict, config: Config, num_devices: int, directory: Path,
                    plan: str) -> None:
    """Raises ConfigError when `config` would not continue the run whose checkpoint `record`
    this is. Only the settings of `RESUMABLE_CHANGES` may differ, and `total_timesteps` may
    grow: a finished or stopped run then trains more. The devices, processes and plan may
    differ too (where the envs divide over the devices: `validate` checks that): the run goes
    on from the saved state, and the log says that the rest of it is not bit for bit what it
    would have been where it was saved (docs/runs.md says why)."""
    resume = f"resume={str(config.resume).lower()}"
    processes = jax.process_count()
    saved = (record.get("devices", num_devices), record.get("processes", 1),
             record.get("plan", "cpu"))  # purerl 0.2.0 saved no plan; it ran on CPUs
    now = (num_devices, processes, plan)
    if saved != now:
        log.info("%s: %s was trained on %d device(s) of %d process(es) with plan %s, this run "
                 "has %d device(s) of %d process(es) with plan %s: it goes on from the saved "
                 "state, not bit for bit as it would have gone on there (docs/runs.md)",
                 resume, directory, *saved, *now)
    changed = config_differences(record["config"], config,
                                 ignore=RESUMABLE_CHANGES + ("total_timesteps",))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        shown = ", ".join(changed[:3]) + more
        raise ConfigError(
            f"{resume}: {directory} was trained with other settings ({shown}); only "
            f"{', '.join(RESUMABLE_CHANGES)} may change on resume, and total_timesteps grow")
    if record["update"] > config.num_updates:
        raise ConfigError(
            f"{resume}: total_timesteps={config.total_timesteps} is {config.num_updates} "
            f"updates, fewer than the {record['update']} that {directory}'s checkpoint holds")


def load_config(record: Dict) -> Config:
    """The `Config` saved in a checkpoint's record."""
    return _from_dict(Config, record["config"])


def _from_dict(cls, values: Dict):
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        value = values[f.name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        kwargs[f.name] = (_from_dict(type(default), value)
                          if dataclasses.is_dataclass(default) else value)
    return cls(**kwargs)


def final_checkpoint(run_dir: Path, which: str = "final") -> Tuple[Checkpoints, int]:
    """The checkpoints and update of a run directory's newest (`final`) or `best` checkpoint;
    raises ConfigError when there is none."""
    directory = Path(run_dir) / CHECKPOINTS
    if which == BEST:
        directory = directory / BEST
    elif which != "final":
        raise ConfigError(f"checkpoint={which!r} must be final or best")
    if not directory.is_dir():
        kind = " with checkpoint.best=true" if which == BEST else ""
        raise ConfigError(f"{run_dir}: no {directory.relative_to(Path(run_dir))}/ directory "
                          f"(is it a purerl run directory{kind}?)")
    checkpoints = Checkpoints(directory)
    update = checkpoints.latest()
    if update is None:
        raise ConfigError(f"{directory}: no complete checkpoint")
    return checkpoints, update


class SavedRun(NamedTuple):
    update: int
    config: Config
    state: Any  # the RunnerState, leaves `[S, ...]` (host arrays)
    record: Dict


def restore_run(run_dir: Path, which: str = "final", **given) -> SavedRun:
    """A run directory's newest (`final`) or `best` intact checkpoint, restored into the state
    its saved config describes (and `given`: what the run was given from Python, as
    `make_program` takes it); raises ConfigError."""
    from purerl.program import make_program

    checkpoints, update = final_checkpoint(run_dir, which)
    try:
        update, record = checkpoints.record_intact(update)
        config = load_config(record)
        # On this process's first device, whatever devices the run was saved from.
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
                            jax.eval_shape(make_program(config, **given).init, jax.random.key(0)))
        update, state, record = checkpoints.restore_intact(update, like)
    finally:
        checkpoints.close()
    return SavedRun(update, config, state, record)
