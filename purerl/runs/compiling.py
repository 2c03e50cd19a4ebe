"""Compiling a run's programs: init and the update chunk first (what the run waits for), then
the evaluation program and PBT's generation step while the first chunks train; and a cache of
the compiled programs, so that the jobs of a sweep that differ only in the programs' arguments
(the seed, the hyperparameters' values) compile once."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional, Tuple

import jax
import numpy as np

from purerl.algos.evaluation import make_evaluator
from purerl.config import Config
from purerl.core.prng import convert_key
from purerl.envs import make_env
from purerl.logging.sinks import import_libraries
from purerl.parallel.devices import map_seeds
from purerl.parallel.distributed import writes_files
from purerl.parallel.pbt import make_pbt_step
from purerl.storage.checkpoint import import_orbax

log = logging.getLogger("purerl")
EVAL_STREAM = 0x5EED  # evaluation draws its keys from this stream of the seed, apart from training


class Programs:
    """The compiled programs of a run. `init` ((key, hparams) -> RunnerState) and `run_chunk`
    ((state, num) -> (state, Metrics [S, chunk]): `num` updates) are ready when
    `compile_programs` returns; the evaluation program and PBT's generation step are first
    needed after a chunk, so they compile in a thread while the first chunks train, and their
    first call waits for them. `compile_s`: seconds until init and chunk were compiled, plus
    the waits for the others."""

    def __init__(self, init: Callable, run_chunk: Callable, evaluate: Future,
                 pbt: Optional[Future], compile_s: float):
        self.init, self.run_chunk, self.compile_s = init, run_chunk, compile_s
        self._evaluate, self._pbt = evaluate, pbt

    def _ready(self, compiling: Future) -> Callable:
        if not compiling.done():
            start = time.perf_counter()
            compiling.result()
            self.compile_s += time.perf_counter() - start
        return compiling.result()

    def reused(self) -> "Programs":
        """The same programs for another run, none of whose time went to compiling them.

        Returns:
            A `Programs` sharing these compiled functions, its `compile_s` 0.
        """
        return Programs(self.init, self.run_chunk, self._evaluate, self._pbt, compile_s=0.0)

    def evaluate(self, params, obs_stats, keys):
        """EvalResult [S, temperatures] of the members' `params` and observation statistics,
        from their keys `[S]`.

        Args:
            params: the members' network params, leaves `[S, ...]`.
            obs_stats: the members' observation statistics (`RunningMeanStd`, leaves
                `[S, *obs_shape]`, `count` `[S]`).
            keys: typed PRNG keys `[S]` (`eval_keys`).

        Returns:
            `EvalResult`, `episode_return` and `episode_length` float32 `[S, num_temperatures]`.
        """
        return self._ready(self._evaluate)(params, obs_stats, keys)

    def pbt(self, state, fitness, key):
        """(state, source [S]): a generation of exploit and explore (`pbt.every` > 0).

        Args:
            state: the `RunnerState`, leaves `[S, ...]`.
            fitness: float32 `[S]`, each member's fitness (higher is better).
            key: a typed PRNG key.

        Returns:
            `(state, source)`: the new state, and int32 `[S]`, the member each one now copies
                (itself when it was kept); see `purerl.parallel.pbt.make_pbt_step`.
        """
        return self._ready(self._pbt)(state, fitness, key)


def compile_programs(config: Config, program, key,
                     meanwhile: Callable[[], None] = lambda: None) -> Programs:
    """Lowers the init, chunk and evaluation programs (and PBT's generation step when
    `pbt.every`) one after another. Init and chunk compile in threads as soon as they are
    lowered (XLA compiles without the GIL while Python lowers the next); the others compile
    once the chunk program is compiled, while the run trains. All but init are lowered from
    the state's shapes and shardings: no state is made before the run directory is opened.

    Args:
        config: the run's settings.
        program: its `purerl.parallel.program.Program`.
        key: the run's PRNG key.
        meanwhile: runs once all are lowered, while init and chunk compile.

    Returns:
        The Programs; `compile_s` is the time until init and chunk were compiled and all
            lowered, whether or not `meanwhile` took longer.
    """
    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="compile")

    lowered_init = jax.jit(program.init, out_shardings=program.state_sharding).lower(
        key, program.hyperparams)
    compiling_init = pool.submit(_compiled_at, lowered_init)
    state = jax.tree.map(
        lambda sharding, shapes: jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), shapes),
        program.state_sharding, lowered_init.out_info)
    compiling_chunk = pool.submit(_compiled_at, jax.jit(program.run, donate_argnums=0).lower(
        state, np.int32(program.chunk)))

    def after_chunk(lowered):
        return pool.submit(_compile_after, compiling_chunk, lowered)

    evaluator = make_evaluator(program.agent, make_env(config.env)[1], config.eval)
    evaluate = after_chunk(jax.jit(map_seeds(evaluator.evaluate, config.num_members)).lower(
        state.params, state.normalizer.obs, eval_keys(config, key)))
    pbt = None
    if config.pbt.every:

        fitness = jax.ShapeDtypeStruct((config.num_members,), np.float32)
        pbt = after_chunk(jax.jit(make_pbt_step(config), donate_argnums=0,
                                  out_shardings=(program.state_sharding, None)).lower(
            state, fitness, jax.random.key(0)))
    pool.shutdown(wait=False)  # its threads finish what was submitted
    lowered = time.perf_counter()
    meanwhile()
    init, init_ready = compiling_init.result()
    run_chunk, chunk_ready = compiling_chunk.result()
    return Programs(init, run_chunk, evaluate, pbt,
                    compile_s=max(lowered, init_ready, chunk_ready) - start)


def _compiled_at(lowered) -> Tuple[Callable, float]:
    """`lowered`'s executable, and when it was ready (`time.perf_counter()`)."""
    return lowered.compile(), time.perf_counter()


def _compile_after(first: Future, lowered) -> Callable:
    """`lowered`'s executable, compiled once `first` is done: the cores go first to the
    programs the run waits for."""
    first.result()
    return lowered.compile()


def import_writers(config: Config) -> None:
    """Imports the libraries of the run's sinks and checkpoints ahead of their first use
    (about 0.7 s on a 2-core CPU).

    Args:
        config: the run's config; `log` names the sinks (TensorBoard, W&B).
    """
    import_orbax()
    if writes_files():
        import_libraries(config.log)


def eval_keys(config: Config, key):
    """One evaluation's keys `[M]`, one per member, split from `key` and then converted to the
    run's PRNG (`prng_impl`), which compiles to far fewer kernels than JAX's default threefry.

    Args:
        config: the run's config (`num_members`, `prng_impl`).
        key: a typed PRNG key.

    Returns:
        Typed keys `[M]` (`M = config.num_members`) of PRNG `config.prng_impl`.
    """
    return convert_key(jax.random.split(key, config.num_members), config.prng_impl)
