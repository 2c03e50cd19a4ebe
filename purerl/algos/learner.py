"""The learner: epochs x minibatches of optimizer steps on a batch, of any loss terms.

`make_learner(agent, loss_terms, ...) -> Learner(shuffle_shape, learn, init_opt_state)`;
`learn(params, opt_state, batch, shuffle_bits, hparams) -> Learned` is a pure function of
arrays. Each step sums the loss terms (`purerl.core.losses`), their metrics logged as
`loss/<name>`; an optional stop rule (`StopRule`, e.g. `target_kl_stop`) ends an update's
remaining steps from what the terms report (inside jit), and an optional rate rule
(`RateRule`, e.g. `adaptive_kl_rate`) sets each step's learning rate from them; the NaN
guard's bits of the loss and gradients are set.

The optimizer is an optax `GradientTransformation` on the parameter tree, made per update by an
`Optimizer` factory from the update's (scheduled, traced) `HyperParams`; by default
`default_optimizer`: global-norm clipping then Adam (with the plan's `flat_optimizer`, stepped
within an update on the params and its state raveled into one vector each:
`ravel_like_params`). Between updates the state is optax's of the param tree on every plan.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Protocol, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from purerl.core.collectives import per_device, pmean
from purerl.core.losses import Batch, LossTerm, normalize_advantages
from purerl.core.prng import permutation_bits_shape, permutations_from_bits
from purerl.core.schedules import HyperParams
from purerl.nets.agent import Agent

# The NaN guard's bits (`Learned.nonfinite`, `Metrics.nonfinite`): which quantity was not
# finite in an update.
NONFINITE_QUANTITIES = ("loss", "gradients", "params", "optimizer state",
                        "normalization statistics")


class Learned(NamedTuple):
    """What `Learner.learn` returns: the update's new params and optimizer state, its loss
    terms' metrics and step count, and the NaN guard's bits."""

    params: Any  # the param tree after the update's steps
    opt_state: Any
    # The loss terms' metrics as `loss/<name>`, means over the minibatches computed (each
    # measured before its step)
    info: Dict[str, jax.Array]
    opt_steps: jax.Array  # int32 [], optimizer steps applied
    nonfinite: jax.Array  # int32 [], NaN-guard bits of the loss (1) and gradients (2)
    # float32 [], the learning rate after the update's steps under a `RateRule`; None without
    lr: Optional[jax.Array] = None


class Optimizer(Protocol):
    """What `make_program(config, optimizer=fn)` takes: the optimizer of an update's steps."""

    def __call__(self, hparams: HyperParams) -> optax.GradientTransformation:
        """The optimizer of the parameter tree.

        Args:
            hparams: the update's (scheduled) hyperparameters, traced scalars (`hparams.lr`).

        Returns:
            An optax `GradientTransformation` of the parameter tree (per-leaf tools such as
                `optax.multi_transform` apply).
        """


class StopRule(Protocol):
    """When the learner ends an update's optimizer steps early.

    Called after each step's loss and gradients, before its parameters are kept: when it
    returns true, that step is undone and the update's remaining steps are skipped.
    """

    def __call__(self, metrics: Dict[str, jax.Array], hparams: Any) -> jax.Array:
        """Whether to stop at this step.

        Args:
            metrics: the step's loss terms' metrics, scalars under their logged names
                (`loss/<name>`), averaged over devices.
            hparams: the update's (scheduled) hyperparameters.

        Returns:
            A bool `[]`: undo this step and skip the rest.
        """


def target_kl_stop(metric: str = "loss/approx_kl", factor: float = 1.5) -> StopRule:
    """PPO's target-KL stop: a step whose KL passes `factor` x `hparams.target_kl` is undone
    and the update's remaining steps skipped (`ppo.target_kl`; +inf never stops).

    Args:
        metric: the logged name of the KL estimate that a loss term reports (PPO's own term
            reports `loss/approx_kl`).
        factor: how far past the target the KL may go.

    Returns:
        The `StopRule`.
    """
    def stop(metrics: Dict[str, jax.Array], hparams: HyperParams) -> jax.Array:
        if metric not in metrics:
            raise ValueError(f"the target-KL stop reads {metric}, which no loss term reports "
                             f"(they report {sorted(metrics)})")
        return metrics[metric] > factor * hparams.target_kl

    return stop


class RateRule(Protocol):
    """The learning rate of each optimizer step, from what the step's loss terms report.

    Called after each step's loss and gradients, before its optimizer update, which then
    runs at the rate it returns (`hparams.lr` of the optimizer's factory); an update's first
    step starts from `hparams.lr`.
    """

    def __call__(self, metrics: Dict[str, jax.Array], lr: jax.Array) -> jax.Array:
        """The step's rate.

        Args:
            metrics: the step's loss terms' metrics, scalars under their logged names
                (`loss/<name>`), averaged over devices.
            lr: float32 `[]`, the rate of the step before (or the update's `hparams.lr`).

        Returns:
            float32 `[]`.
        """


def adaptive_kl_rate(desired_kl: float, lr_min: float, lr_max: float,
                     metric: str = "loss/approx_kl", factor: float = 1.5) -> RateRule:
    """rsl_rl's KL-adaptive learning rate, as Brax's PPO has it (`ppo.lr_schedule=adaptive_kl`):
    the rate divided by `factor` where the step's KL passes 2 x `desired_kl`, multiplied by it
    where the KL is above 0 and below `desired_kl / 2`, and kept within `[lr_min, lr_max]` by
    each move. The KL is the step's, measured before it (0 on an update's first step, which
    then keeps the rate).

    Args:
        desired_kl: the KL aimed at (`ppo.desired_kl`).
        lr_min: the lowest rate a step down reaches (`ppo.lr_min`).
        lr_max: the highest rate a step up reaches (`ppo.lr_max`).
        metric: the logged name of the KL estimate that a loss term reports.
        factor: each move's factor.

    Returns:
        The `RateRule`.
    """
    def rate(metrics: Dict[str, jax.Array], lr: jax.Array) -> jax.Array:
        if metric not in metrics:
            raise ValueError(f"ppo.lr_schedule=adaptive_kl reads {metric}, which no loss term "
                             f"reports (they report {sorted(metrics)})")
        kl = metrics[metric]
        lr = jnp.where(kl > 2.0 * desired_kl, jnp.maximum(lr_min, lr / factor), lr)
        return jnp.where((kl < desired_kl / 2.0) & (kl > 0.0),
                         jnp.minimum(lr_max, lr * factor), lr).astype(jnp.float32)

    return rate


class Learner(NamedTuple):
    """A learner made by `make_learner`: `learn(params, opt_state, batch, shuffle_bits,
    hparams) -> Learned` (`shuffle_bits`: uint32 of `shuffle_shape`, drawn by the caller) and
    `init_opt_state(params, hparams)`, the optimizer's state before its first step."""

    shuffle_shape: Tuple[int, ...]  # of the uint32 bits `learn` shuffles the batch with
    learn: Callable[..., Learned]  # (params, opt_state, Batch, shuffle_bits, HyperParams)
    init_opt_state: Callable[[Any, HyperParams], Any]  # (params, HyperParams) -> opt_state


class MakeLearner(Protocol):
    """A factory of learners with `make_learner`'s signature, what `make_ppo(learner=)` takes."""

    def __call__(self, agent: Agent, loss_terms: Sequence[LossTerm], *, batch_size: int,
                 num_epochs: int, num_minibatches: int, prng_impl: str,
                 stop_rule: Optional[StopRule] = None, axis_name: Optional[str] = None,
                 optimizer: Optional[Optimizer] = None,
                 rate_rule: Optional[RateRule] = None) -> Learner:
        """The learner of `loss_terms` (`rate_rule` is passed only when one is set).

        Args:
            agent: the agent whose network the terms are computed with.
            loss_terms: the terms summed into each minibatch's loss.
            batch_size: the samples `N` of a batch `[N, ...]` (a recurrent one's env
                sequences `B`).
            num_epochs: the passes over the batch.
            num_minibatches: the minibatches of each pass.
            prng_impl: the PRNG implementation of the shuffle's bits.
            stop_rule: when to end an update's steps early; None: never.
            axis_name: the device axis gradients are averaged over; None on one device.
            optimizer: the factory of the optimizer; None: `default_optimizer`.
            rate_rule: each step's learning rate; None: `hparams.lr` throughout.

        Returns:
            The `Learner`, as `make_learner` documents it.
        """


def make_optimizer(max_grad_norm, lr) -> optax.GradientTransformation:
    """Global-norm clipping then Adam (eps 1e-5), of any param tree.

    Args:
        max_grad_norm: the global norm that gradients are clipped to; may be a traced scalar.
        lr: the learning rate; may be a traced scalar.

    Returns:
        The optax optimizer.
    """
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.scale_by_adam(eps=1e-5),
        optax.scale_by_learning_rate(lr),
    )


def default_optimizer(hp: HyperParams) -> optax.GradientTransformation:
    """The learner's optimizer unless given another: `make_optimizer(hp.max_grad_norm, hp.lr)`
    on the param tree (with the plan's `flat_optimizer`, the learner steps it on the params
    raveled into one vector, its state raveled alike, within each update: `make_learner`).

    Args:
        hp: the update's hyperparameters (traced scalars).

    Returns:
        The optimizer; its state `(EmptyState(), ScaleByAdamState(count [], mu, nu),
            EmptyState())`, `mu` and `nu` param trees.
    """
    return make_optimizer(hp.max_grad_norm, hp.lr)


def ravel_like_params(state: Any, params: Any, lead: int = 0) -> Any:
    """`state` with each subtree that has the structure and shapes of `params` (Adam's `mu` and
    `nu`) raveled into one vector `[..., P]`, its leaves' values in `jax.tree.leaves` order, as
    `ravel_pytree` orders them (P values in all, after `lead` leading axes kept: the members').

    Args:
        state: an optimizer state of the param tree `params` (or its shapes).
        params: the param tree, leaves `[*lead, ...]`.
        lead: leading axes of every leaf that are not the params' own.

    Returns:
        The state with those subtrees as `[*lead, P]` vectors, the rest unchanged.
    """
    is_params = _params_shaped(params)

    def ravel(node):
        if not is_params(node):
            return node
        return jnp.concatenate([x.reshape(*x.shape[:lead], -1) for x in jax.tree.leaves(node)],
                               axis=lead)

    return jax.tree.map(ravel, state, is_leaf=is_params)


def unravel_like_params(flat_state: Any, like: Any, params: Any, lead: int = 0) -> Any:
    """The inverse of `ravel_like_params`: each `[*lead, P]` vector of `flat_state` where the
    state `like` holds a subtree shaped as `params`, split back into that subtree.

    Args:
        flat_state: a state as `ravel_like_params(like, params, lead)` gives it.
        like: the state in the tree layout (or its shapes).
        params: the param tree (or its shapes), leaves `[*lead, ...]`.
        lead: leading axes of every leaf that are not the params' own.

    Returns:
        `flat_state` in `like`'s layout.
    """
    is_params = _params_shaped(params)
    leaves, treedef = jax.tree.flatten(params)
    sizes = [int(np.prod(x.shape[lead:])) for x in leaves]
    splits = list(np.cumsum(sizes)[:-1])

    def unravel(flat, node):
        if not is_params(node):
            return flat
        parts = jnp.split(flat, splits, axis=lead)
        return treedef.unflatten([part.reshape(x.shape) for part, x in zip(parts, leaves)])

    return jax.tree.map(unravel, flat_state, like)


def _params_shaped(params: Any) -> Callable[[Any], bool]:
    """Whether a node of an optimizer state has the structure and leaf shapes of `params`."""
    treedef = jax.tree.structure(params)
    shapes = [x.shape for x in jax.tree.leaves(params)]

    def is_params(node) -> bool:
        return (jax.tree.structure(node) == treedef
                and [x.shape for x in jax.tree.leaves(node)] == shapes)

    return is_params


class _Carry(NamedTuple):
    params: Any  # the param tree, or raveled `[P]` (`carries_flat`)
    opt_state: Any
    stopped: jax.Array  # bool [], target KL exceeded: skip the remaining steps
    info_sum: Dict[str, jax.Array]  # the terms' metrics summed over the minibatches computed
    computed: jax.Array  # int32 []
    taken: jax.Array  # int32 [], optimizer steps applied
    nonfinite: jax.Array  # int32 []
    lr: jax.Array  # float32 [], the last step's learning rate


def make_learner(agent: Agent, loss_terms: Sequence[LossTerm], *, batch_size: int,
                 num_epochs: int, num_minibatches: int, prng_impl: str,
                 stop_rule: Optional[StopRule] = None, axis_name: Optional[str] = None,
                 optimizer: Optional[Optimizer] = None,
                 rate_rule: Optional[RateRule] = None) -> Learner:
    """The learner of a batch: `num_epochs` passes of `num_minibatches` minibatches, each step
    on the sum of `loss_terms`.

    A recurrent agent's batch is `batch_size` env sequences (`Batch.first`, `Batch.carry`);
    its minibatches are groups of whole sequences, replayed from the carry at their start with
    the rollout's resets.

    Args:
        agent: the agent whose network the terms are computed with (`purerl.nets.agent`).
        loss_terms: the terms summed into each minibatch's loss (`purerl.core.losses.LossTerm`),
            at least one; their metrics are logged as `loss/<name>`, and no two may share one.
        batch_size: the samples `N` of a feed-forward batch `[N, ...]`, or the env sequences
            `B` of a recurrent one `[T, B, ...]`.
        num_epochs: the passes over the batch.
        num_minibatches: the minibatches of each pass (dividing `batch_size`).
        prng_impl: the PRNG implementation of the shuffle's bits (`Config.prng_impl`).
        stop_rule: when to end an update's steps early (`target_kl_stop`); None: never.
        axis_name: the device axis that gradients, loss statistics and advantage statistics
            are averaged over; None on one device.
        optimizer: the factory of the optimizer (default: `default_optimizer`).
        rate_rule: each step's learning rate (`adaptive_kl_rate`), the optimizer made anew
            per step at it; None: the optimizer of `hparams` throughout.

    Returns:
        The `Learner`: `learn(params, opt_state, batch, shuffle_bits, hparams) -> Learned`,
            `init_opt_state(params, hparams)` and the `shuffle_shape` of its uint32 bits.
    """
    if not loss_terms:
        raise ValueError("make_learner: no loss terms to learn from")
    recurrent = agent.recurrent
    minibatch_size = batch_size // num_minibatches
    num_steps = num_epochs * num_minibatches
    plan = agent.plan
    shuffle_shape = permutation_bits_shape(num_epochs, batch_size, prng_impl,
                                           plan.packed_sort_bits, plan.index_shuffle)
    make_opt = default_optimizer if optimizer is None else optimizer
    # The default optimizer with the plan's `flat_optimizer`: the scan carries the params and
    # the optimizer state raveled into one vector `[P]` each (converted at the update's start
    # and end, so that the state between updates is optax's of the tree on every plan); each
    # step unravels the params once for the network (slices that fuse into its matmuls) and
    # updates them in one fused op, with no ravel of the gradients per step.
    carries_flat = optimizer is None and plan.flat_optimizer

    def init_opt_state(params, hp: HyperParams):
        """The optimizer's state of the param tree `params` before its first step."""
        return make_opt(hp).init(params)

    def learn(params, opt_state, batch: Batch, shuffle_bits: jax.Array,
              hp: HyperParams) -> Learned:
        """All epochs x minibatches as one scan over minibatches shuffled by uint32
        `shuffle_bits` of `shuffle_shape` (with the plan's `permutation_per_epoch` or
        `gather_per_epoch`, a scan over epochs of scans over their minibatches)."""
        if carries_flat:
            start, as_tree = ravel_pytree(params)
            opt_start = ravel_like_params(opt_state, params)
        else:
            start, as_tree, opt_start = params, (lambda tree: tree), opt_state
        grad_fn = jax.value_and_grad(
            lambda carried, minibatch, hp: _minibatch_loss(agent, loss_terms, as_tree(carried),
                                                           minibatch, hp),
            has_aux=True)
        # elementwise or by a global norm, when `carries_flat`
        take_step = _make_step(grad_fn, make_opt, stop_rule, rate_rule, hp, axis_name)
        gather = lambda rows: _gather(batch, rows, recurrent, axis_name)  # noqa: E731
        permutations = lambda bits: permutations_from_bits(  # noqa: E731
            bits, batch_size, prng_impl, plan.packed_sort_bits, plan.index_shuffle)
        batch_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(batch))
        by_epoch = plan.permutation_per_epoch or plan.gather_per_epoch
        gather_ahead = not by_epoch and batch_bytes * num_epochs <= plan.gather_ahead_bytes
        # the step's minibatch is its input as it is, or gathered from its rows [mb]
        gathered = gather_ahead or plan.gather_per_epoch

        def minibatch_step(carry: _Carry, step_input):
            minibatch = step_input if gathered else gather(step_input)
            if stop_rule is not None:
                carry = jax.lax.cond(carry.stopped, lambda c, _: c, take_step, carry, minibatch)
            else:
                carry = take_step(carry, minibatch)
            return carry, None

        def epoch(carry: _Carry, epoch_input):
            """One pass over the batch, from its permutation `[batch_size]` or its bits."""
            order = permutations(epoch_input[None])[0] if plan.permutation_per_epoch \
                else epoch_input
            rows = order.reshape(num_minibatches, minibatch_size)
            return jax.lax.scan(minibatch_step, carry,
                                gather(rows) if plan.gather_per_epoch else rows)[0], None

        metric_shapes = jax.eval_shape(
            lambda *args: _minibatch_loss(agent, loss_terms, *args), params,
            jax.eval_shape(gather, jax.ShapeDtypeStruct((minibatch_size,), jnp.int32)), hp)[1]
        carry = _Carry(start, opt_start, jnp.bool_(False),
                       jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), metric_shapes),
                       jnp.int32(0), jnp.int32(0), jnp.int32(0), jnp.asarray(hp.lr, jnp.float32))
        if by_epoch:
            carry = jax.lax.scan(epoch, carry, shuffle_bits if plan.permutation_per_epoch
                                 else permutations(shuffle_bits))[0]
        else:
            # Gathered ahead, the advantages of all minibatches are normalized at once (on
            # several devices, one all-reduce for all of them).
            indices = permutations(shuffle_bits).reshape(num_steps, minibatch_size)
            carry = jax.lax.scan(minibatch_step, carry,
                                 gather(indices) if gather_ahead else indices)[0]
        computed = jnp.maximum(carry.computed, 1)
        opt_end = (unravel_like_params(carry.opt_state, opt_state, params) if carries_flat
                   else carry.opt_state)
        return Learned(as_tree(carry.params), opt_end,
                       jax.tree.map(lambda total: total / computed, carry.info_sum),
                       carry.taken, carry.nonfinite, None if rate_rule is None else carry.lr)

    return Learner(shuffle_shape, learn, init_opt_state)


def _minibatch_loss(agent: Agent, loss_terms: Sequence[LossTerm], params, minibatch: Batch,
                    hp: HyperParams) -> Tuple[jax.Array, Dict[str, jax.Array]]:
    """The minibatch's loss, the sum of the terms', and their metrics as `loss/<name>`."""
    network = agent.network
    if agent.recurrent:  # [T, b] sequences, flattened to samples after the replay
        _, policy_out, value = network.apply(params, minibatch.carry, minibatch.obs,
                                             minibatch.first, method="unroll")
        outputs, minibatch = jax.tree.map(
            lambda x: x.reshape(-1, *x.shape[2:]),
            ((policy_out, value), minibatch._replace(first=None, carry=None)))
    else:
        outputs = network.apply(params, minibatch.obs)
    outputs = (agent.masked(outputs[0], minibatch.action_mask), *outputs[1:])
    loss, metrics = None, {}
    for term in loss_terms:
        term_loss, term_metrics = term(params, minibatch, outputs, hp)
        metrics.update(_term_metrics(term, term_loss, term_metrics, metrics))
        loss = term_loss if loss is None else loss + term_loss
    return loss, metrics


def _gather(batch: Batch, rows: jax.Array, recurrent: bool, axis_name: Optional[str]) -> Batch:
    """The minibatches of `rows [..., mb]`, their advantages normalized over each: samples
    `[..., mb, ...]`, or for a recurrent batch, whose rows index envs, sequences
    `[..., T, mb, ...]` with their carries."""
    if not recurrent:
        minibatch = jax.tree.map(lambda x: x[rows], batch)
        return minibatch._replace(
            advantages=normalize_advantages(minibatch.advantages, axis_name))
    # rows index envs: the time-major leaves' axis 1 -> `[..., T, mb, ...]`
    sequences = jax.tree.map(lambda x: jnp.moveaxis(x[:, rows], 0, rows.ndim - 1),
                             batch._replace(carry=None))
    advantages = sequences.advantages  # normalized over each minibatch's T x mb
    flat = advantages.reshape(*advantages.shape[:-2], -1)
    return sequences._replace(
        advantages=normalize_advantages(flat, axis_name).reshape(advantages.shape),
        carry=batch.carry[rows])


def _make_step(grad_fn, make_opt: Optimizer, stop_rule: Optional[StopRule],
               rate_rule: Optional[RateRule], hp: HyperParams,
               axis_name: Optional[str]) -> Callable[[_Carry, Batch], _Carry]:
    """One optimizer step on a minibatch: gradients averaged over the devices, the NaN guard's
    bits of the loss and gradients, the rate `rate_rule` sets, and the step undone where
    `stop_rule` says so."""
    fixed_opt = make_opt(hp) if rate_rule is None else None

    def take_step(carry: _Carry, minibatch: Batch) -> _Carry:
        (loss, info), grads = grad_fn(per_device(carry.params, axis_name), minibatch, hp)
        grads, info, loss = pmean((grads, info, loss), axis_name)
        loss_ok = jnp.isfinite(loss)
        grads_ok = jnp.isfinite(optax.tree.norm(grads))  # the norm clipping computes too
        nonfinite = carry.nonfinite | jnp.where(loss_ok, 0, 1) | jnp.where(grads_ok, 0, 2)
        if rate_rule is None:
            lr, opt = carry.lr, fixed_opt
        else:
            lr = rate_rule(info, carry.lr)
            opt = make_opt(hp._replace(lr=lr))
        updates, opt_state = opt.update(grads, carry.opt_state, carry.params)
        params = optax.apply_updates(carry.params, updates)
        if stop_rule is None:
            exceeded = jnp.bool_(False)
        else:  # this step already went too far: keep the old params
            exceeded = stop_rule(info, hp)
            params, opt_state = jax.tree.map(
                lambda new, old: jnp.where(exceeded, old, new),
                (params, opt_state), (carry.params, carry.opt_state),
            )
        return _Carry(params, opt_state, exceeded,
                      jax.tree.map(jnp.add, carry.info_sum, info), carry.computed + 1,
                      carry.taken + jnp.int32(~exceeded), nonfinite, lr)

    return take_step


def _term_metrics(term: LossTerm, loss: jax.Array, metrics: Dict[str, jax.Array],
                  earlier: Dict[str, jax.Array]) -> Dict[str, jax.Array]:
    """A term's metrics under their logged names, `loss/<name>`; raises ValueError for a loss
    or metric that is not a scalar, or a name an earlier term logs."""
    label = getattr(term, "__name__", repr(term))
    if jnp.shape(loss) != ():
        raise ValueError(f"loss term {label}: its loss has shape {jnp.shape(loss)}, not a scalar")
    named = {}
    for name, value in metrics.items():
        key = f"loss/{name}"
        if jnp.shape(value) != ():
            raise ValueError(f"loss term {label}: metric {name!r} has shape {jnp.shape(value)}, "
                             "not a scalar")
        if key in earlier:
            raise ValueError(f"loss term {label}: metric {name!r} is logged as {key} by an "
                             "earlier term too")
        named[key] = jnp.asarray(value, jnp.float32)
    return named


def nonfinite_bits(*checked: Tuple[Any, int]) -> jax.Array:
    """The OR of the `bit`s of those `(tree, bit)` pairs whose tree has a non-finite float
    leaf, an int32 scalar: one reduction over all the leaves raveled together, not one per
    leaf or per tree.

    Args:
        *checked: `(tree, bit)` pairs: a pytree whose float leaves are checked, and the bit
            (1, 2, 4, ... of `NONFINITE_QUANTITIES`) it sets.

    Returns:
        An int32 `[]`, the OR of the bits of the trees with a NaN or an infinity.
    """
    leaves, segments = [], []  # segments: (number of float values, bit) per tree
    for tree, bit in checked:
        floats = [leaf.ravel().astype(jnp.float32) for leaf in jax.tree.leaves(tree)
                  if jnp.issubdtype(leaf.dtype, jnp.floating)]
        leaves += floats
        segments.append((sum(x.size for x in floats), bit))
    values = jnp.concatenate(leaves)
    index, tree_bit, start = jnp.arange(values.size), jnp.int32(0), 0
    for size, bit in segments:  # tree_bit[i]: the bit of the tree that values[i] is from
        tree_bit = jnp.where(index >= start, bit, tree_bit)
        start += size
    flags = jnp.where(jnp.isfinite(values), 0, tree_bit)
    return jax.lax.reduce(flags, np.int32(0), jax.lax.bitwise_or, (0,))


def nonfinite_names(mask: int) -> list:
    """The quantities named by a NaN-guard bit mask.

    Args:
        mask: the OR of `NONFINITE_QUANTITIES`' bits (`Metrics.nonfinite`).

    Returns:
        Their names, in `NONFINITE_QUANTITIES`' order.
    """
    return [name for bit, name in enumerate(NONFINITE_QUANTITIES) if mask >> bit & 1]
