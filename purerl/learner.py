"""The learner: the epochs x minibatches of optimizer steps of one PPO update.

`make_learner(agent, ...) -> Learner(shuffle_shape, learn)`; `learn(params, opt_state, batch,
shuffle_bits, hparams) -> Learned` is a pure function of arrays. It stops an update's remaining
steps once the approximate KL exceeds the target (inside jit), and sets the NaN guard's bits of
the loss and gradients.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from purerl.agent import Agent
from purerl.losses import LossInfo, normalize_advantages, ppo_loss
from purerl.parallel import cpu_backend, per_device, pmean
from purerl.prng import permutation_bits_shape, permutations_from_bits
from purerl.schedules import HyperParams

# The NaN guard's bits (`Learned.nonfinite`, `Metrics.nonfinite`): which quantity was not
# finite in an update.
NONFINITE_QUANTITIES = ("loss", "gradients", "params", "optimizer state",
                        "normalization statistics")
# On CPU, minibatches are gathered for all epochs before the steps (one gather instead of a
# small one per step) while the copies weigh at most this many bytes; elsewhere, or above it,
# each step gathers its own.
MAX_BYTES_GATHERED_AHEAD = 1 << 27


class Batch(NamedTuple):
    """What the learner learns from: `[N, ...]` samples (N = envs x steps) for a feed-forward
    policy; for a recurrent one, time-major sequences `[T, B, ...]`, with `first` and
    `carry`."""

    obs: jax.Array  # the network's input
    action: jax.Array
    log_prob: jax.Array  # of the action under the rollout's policy
    value: jax.Array  # the rollout's V(obs)
    advantages: jax.Array  # not normalized (each minibatch normalizes its own)
    returns: jax.Array
    first: Optional[jax.Array] = None  # bool `[T, B]`: obs is its episode's first (recurrent)
    carry: Optional[jax.Array] = None  # `[B, C]`: the carry at the sequences' start (recurrent)
    action_mask: Optional[jax.Array] = None  # bool `[..., num_actions]`: legal actions, if masked


class Learned(NamedTuple):
    params: Any  # the param tree after the update's steps
    opt_state: Any
    info: LossInfo  # means over the minibatches computed (each measured before its step)
    opt_steps: jax.Array  # int32 [], optimizer steps applied
    nonfinite: jax.Array  # int32 [], NaN-guard bits of the loss (1) and gradients (2)


class Learner(NamedTuple):
    shuffle_shape: Tuple[int, ...]  # of the uint32 bits `learn` shuffles the batch with
    learn: Callable[..., Learned]  # (params, opt_state, Batch, shuffle_bits, HyperParams)


def make_optimizer(max_grad_norm, lr) -> optax.GradientTransformation:
    """Global-norm clipping then Adam (eps 1e-5); the arguments may be traced arrays.

    The learner applies it to all parameters raveled into one vector (`ravel_pytree`): the
    same math as on the tree, but one fused update instead of a few small kernels per leaf.
    """
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.scale_by_adam(eps=1e-5),
        optax.scale_by_learning_rate(lr),
    )


class _Carry(NamedTuple):
    params: jax.Array  # raveled `[P]`
    opt_state: Any
    stopped: jax.Array  # bool [], target KL exceeded: skip the remaining steps
    info_sum: LossInfo  # summed over the minibatches computed
    computed: jax.Array  # int32 []
    taken: jax.Array  # int32 [], optimizer steps applied
    nonfinite: jax.Array  # int32 []


def make_learner(agent: Agent, *, batch_size: int, num_epochs: int, num_minibatches: int,
                 clip_value: bool, early_stop: bool, prng_impl: str,
                 axis_name: Optional[str] = None) -> Learner:
    """The learner of batches of `batch_size` samples, `num_epochs` passes of
    `num_minibatches` minibatches; `early_stop`: stop at the target KL; `axis_name`: the device
    axis that gradients, loss statistics and advantage statistics are averaged over.

    A recurrent agent's batch is `batch_size` env sequences (`Batch.first`, `Batch.carry`);
    its minibatches are groups of whole sequences, replayed from the carry at their start with
    the rollout's resets."""
    recurrent = agent.recurrent
    minibatch_size = batch_size // num_minibatches
    num_steps = num_epochs * num_minibatches
    shuffle_shape = permutation_bits_shape(num_epochs, batch_size, prng_impl)
    policy, network = agent.policy, agent.network

    def minibatch_loss(params, minibatch: Batch, hp: HyperParams):
        if recurrent:  # [T, b] sequences, flattened to samples after the replay
            _, policy_out, value = network.apply(params, minibatch.carry, minibatch.obs,
                                                 minibatch.first, method="unroll")
            policy_out, value, minibatch = jax.tree.map(
                lambda x: x.reshape(-1, *x.shape[2:]),
                (policy_out, value, minibatch._replace(first=None, carry=None)))
        else:
            policy_out, value = network.apply(params, minibatch.obs)
        policy_out = agent.masked(policy_out, minibatch.action_mask)
        return ppo_loss(
            policy.log_prob(policy_out, minibatch.action), policy.entropy(policy_out), value,
            minibatch.log_prob, minibatch.value, minibatch.advantages, minibatch.returns,
            clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
            clip_value=clip_value,
        )

    def learn(params, opt_state, batch: Batch, shuffle_bits: jax.Array,
              hp: HyperParams) -> Learned:
        """All epochs x minibatches as one scan over minibatches shuffled by uint32
        `shuffle_bits` of `shuffle_shape`. The scan carries the parameters raveled into one
        vector, the optimizer's own layout: each step unravels them once for the network
        (slices that fuse into its matmuls) and updates them in one fused op."""
        flat_params, unravel = ravel_pytree(params)
        optimizer = make_optimizer(hp.max_grad_norm, hp.lr)
        grad_fn = jax.value_and_grad(
            lambda flat, minibatch: minibatch_loss(unravel(flat), minibatch, hp), has_aux=True)
        indices = permutations_from_bits(shuffle_bits, batch_size, prng_impl).reshape(
            num_steps, minibatch_size)
        batch_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(batch))
        gather_ahead = (cpu_backend()
                        and batch_bytes * num_epochs <= MAX_BYTES_GATHERED_AHEAD)

        def gather(rows):  # `rows [..., mb]` -> minibatches, advantages normalized
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

        def take_step(carry: _Carry, minibatch: Batch) -> _Carry:
            (_, info), grads = grad_fn(per_device(carry.params, axis_name), minibatch)
            grads, info = pmean((grads, info), axis_name)
            loss_ok = jnp.isfinite(info.policy_loss + info.value_loss + info.entropy)
            grads_ok = jnp.isfinite(optax.tree.norm(grads))  # the norm clipping computes too
            nonfinite = carry.nonfinite | jnp.where(loss_ok, 0, 1) | jnp.where(grads_ok, 0, 2)
            updates, opt_state = optimizer.update(grads, carry.opt_state)
            params = carry.params + updates
            exceeded = info.approx_kl > 1.5 * hp.target_kl
            if early_stop:  # this step's KL is already too far: keep the old params
                params, opt_state = jax.tree.map(
                    lambda new, old: jnp.where(exceeded, old, new),
                    (params, opt_state), (carry.params, carry.opt_state),
                )
            return _Carry(params, opt_state, exceeded,
                          jax.tree.map(jnp.add, carry.info_sum, info), carry.computed + 1,
                          carry.taken + jnp.int32(~exceeded), nonfinite)

        def minibatch_step(carry: _Carry, step_input):
            minibatch = step_input if gather_ahead else gather(step_input)
            if early_stop:
                carry = jax.lax.cond(carry.stopped, lambda c, _: c, take_step, carry, minibatch)
            else:
                carry = take_step(carry, minibatch)
            return carry, None

        zero = jnp.float32(0)
        carry = _Carry(flat_params, opt_state, jnp.bool_(False), LossInfo(*[zero] * 5),
                       jnp.int32(0), jnp.int32(0), jnp.int32(0))
        # Gathered ahead, the advantages of all minibatches are normalized at once (on several
        # devices, one all-reduce for all of them).
        steps_input = gather(indices) if gather_ahead else indices
        carry = jax.lax.scan(minibatch_step, carry, steps_input)[0]
        computed = jnp.maximum(carry.computed, 1)
        return Learned(unravel(carry.params), carry.opt_state,
                       jax.tree.map(lambda total: total / computed, carry.info_sum),
                       carry.taken, carry.nonfinite)

    return Learner(shuffle_shape, learn)


def nonfinite_bits(*checked: Tuple[Any, int]) -> jax.Array:
    """The OR of the `bit`s of those `(tree, bit)` pairs whose tree has a non-finite float
    leaf, an int32 scalar: one reduction over all the leaves raveled together, not one per
    leaf or per tree."""
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
    """The quantities named by a NaN-guard bit mask."""
    return [name for bit, name in enumerate(NONFINITE_QUANTITIES) if mask >> bit & 1]
