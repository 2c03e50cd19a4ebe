"""The layouts in which a saved `RunnerState` may be found: this version's, and purerl 0.2.0's
CPU plan's, whose optimizer state held the param-shaped trees raveled into `[S, P]` vectors
(purerl's checkpoints hold the tree layout whatever plan ran). `Checkpoints.restore` tries
them in order."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Tuple

import jax

from purerl.algos.learner import ravel_like_params, unravel_like_params


def saved_layouts(abstract: Any) -> Iterator[Tuple[Any, Callable[[Any], Any]]]:
    """The layouts a saved state may have, each with the conversion of a state restored in it
    to `abstract`'s, the next made only when the one before did not fit.

    Args:
        abstract: the state to restore into, as shapes, dtypes and shardings.

    Returns:
        `(layout, to_like)` pairs: `abstract` itself, then (for a `RunnerState` whose
            optimizer state holds param-shaped trees) purerl 0.2.0's CPU-plan layout, those
            trees raveled into `[S, P]`.
    """
    yield abstract, lambda state: state
    if not (isinstance(abstract, tuple) and hasattr(abstract, "opt_state")):
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
