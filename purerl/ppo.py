"""PPO as a pair of pure functions, and the whole training run as one function of a key.

`make_ppo(config, env, env_params) -> PPO(init, update)`: `init(key, hparams) -> RunnerState`,
`update(state) -> (state, Metrics)`, for one seed on one device. `make_train(config)` maps them
over seeds (`vmap`) and devices (`shard_map`) and scans `update` over the run.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from jax.sharding import PartitionSpec as P

from purerl.config import Config, validate
from purerl.distributions import ActionDistribution
from purerl.envs import check_env, make_env, takes_drawn_resets, wrap_env
from purerl.envs.normalization import (
    Normalizer, init_normalizer, network_input, scale_rewards, update_running_stats,
)
from purerl.gae import compute_gae
from purerl.losses import LossInfo, normalize_advantages, ppo_loss
from purerl.networks import ActorCritic, init_params, kernel_normal_size, make_network
from purerl.packing import batch_packer
from purerl.parallel import DEVICE_AXIS, make_mesh, map_seeds, shard_over_devices
from purerl.prng import (convert_key, draw_bits, key_words, keys_from_bits, normal_from_bits,
                         permutation_bits_shape, permutations_from_bits)
from purerl.schedules import HyperParams, hyperparams_from_config, scheduled_hyperparams
from purerl.spaces import ActionSpec


class RunnerState(NamedTuple):
    """Everything a run carries from one update to the next (one seed, one device's envs)."""

    params: Any
    opt_state: Any
    env_state: Any  # [B] env states (B = envs on this device)
    obs: jax.Array  # [B, *obs_shape], as the env returned it (before normalization)
    normalizer: Normalizer  # running observation / return statistics (unused when off)
    key: jax.Array  # typed PRNG key, the same on every device
    update: jax.Array  # int32 [], updates done so far
    hparams: HyperParams  # base (unscheduled) hyperparameters


class Transition(NamedTuple):
    """One rollout, time-major: every field is `[T, B, ...]` but `obs_and_next`."""

    # `[T, 2, B, *obs_shape]`, as the env returned them (before normalization): the
    # observation, and the true next one (pre-reset on an episode's last step); one output
    obs_and_next: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array  # V(obs); with separate value towers, computed after the rollout's scan
    reward: jax.Array
    # uint8: bit 0 terminated, bit 1 truncated; one output for the scan to write, not two
    ends: jax.Array
    episode_done: Optional[jax.Array]  # kept only for reward normalization


class EpisodeSums(NamedTuple):
    """Sums over the episodes that ended in a rollout: `[B]` per env, or over envs `[]`."""

    episode_return: jax.Array  # float32
    episode_length: jax.Array  # int32
    count: jax.Array  # int32


class Metrics(NamedTuple):
    """Scalars of one update, already reduced over envs, steps, minibatches and devices."""

    episode_return_sum: jax.Array  # over the episodes completed in this update
    episode_length_sum: jax.Array
    episode_count: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array
    explained_variance: jax.Array
    value_mean: jax.Array
    opt_steps: jax.Array  # optimizer steps taken (fewer than epochs x minibatches on early stop)
    learning_rate: jax.Array
    ent_coef: jax.Array
    clip_eps: jax.Array
    vf_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    nonfinite: jax.Array  # int32 bit mask, 0 when all is well; see NONFINITE_QUANTITIES


# The NaN guard's bits in `Metrics.nonfinite`: which quantity was not finite in an update.
NONFINITE_QUANTITIES = ("loss", "gradients", "params", "optimizer state",
                        "normalization statistics")


def nonfinite_names(mask: int) -> list:
    """The quantities named by a `Metrics.nonfinite` mask."""
    return [name for bit, name in enumerate(NONFINITE_QUANTITIES) if mask >> bit & 1]


class PPO(NamedTuple):
    init: Callable[[jax.Array, HyperParams], RunnerState]
    update: Callable[[RunnerState], Tuple[RunnerState, Metrics]]


class _LearnerCarry(NamedTuple):
    params: jax.Array  # raveled `[P]`
    opt_state: Any
    stopped: jax.Array  # bool [], target KL exceeded: skip the remaining steps
    info_sum: jax.Array  # [5], the LossInfo fields summed over the minibatches computed
    computed: jax.Array  # int32 []
    taken: jax.Array  # int32 [], optimizer steps applied
    nonfinite: jax.Array  # int32 [], NaN-guard bits of the loss and gradients


def _nonfinite_bits(*checked: Tuple[Any, int]) -> jax.Array:
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


def make_optimizer(max_grad_norm, lr) -> optax.GradientTransformation:
    """Global-norm clipping then Adam (eps 1e-5); the arguments may be traced arrays.

    It works on all parameters raveled into one vector (`ravel_pytree`): the same math as on
    the tree, but one fused update instead of a handful of small kernels per parameter leaf.
    """
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.scale_by_adam(eps=1e-5),
        optax.scale_by_learning_rate(lr),
    )


class Agent(NamedTuple):
    """What training and evaluation share: the env's action spec, the policy's distribution,
    the network, and the env as the trainer steps it (wrapped: auto-reset, one-hot, frame
    stack, episode stats) vmapped over envs."""

    spec: ActionSpec
    obs_shape: Tuple[int, ...]  # of the wrapped env's observations
    policy: ActionDistribution
    network: ActorCritic
    reset_envs: Callable  # (keys [B], env_params) -> (obs [B, ...], env_state [B])
    # (keys [B], env_state [B], action [B], env_params, resets) -> six values [B]; `resets`
    # (from `draw_resets`, or None to draw them inside) are the base env's (obs, state) [B]
    step_envs: Callable
    draw_resets: Optional[Callable]  # (keys [B], env_params) -> resets; None: env can't take them


def make_agent(config: Config, env, env_params) -> Agent:
    """Checks the env's spaces (raises ConfigError) and builds the shared pieces."""
    spec = check_env(env, env_params, config)
    wrapped = wrap_env(env, config.env, env_params)
    obs_space = wrapped.observation_space(env_params)
    draw_resets = None
    if takes_drawn_resets(env):
        draw_resets = jax.vmap(env.reset_env, in_axes=(0, None))
    return Agent(spec, tuple(obs_space.shape), ActionDistribution(spec),
                 make_network(config, spec, obs_space),
                 jax.vmap(wrapped.reset, in_axes=(0, None)),
                 jax.vmap(wrapped.step, in_axes=(0, 0, 0, None, 0)),
                 draw_resets)


def make_ppo(
    config: Config, env, env_params, *, num_envs: Optional[int] = None,
    axis_name: Optional[str] = None,
) -> PPO:
    """PPO for one seed over `num_envs` envs (default: all); `axis_name` names the device axis
    to average gradients and metrics over, when running under `shard_map`."""
    ppo = config.ppo
    num_envs = config.env.num_envs if num_envs is None else num_envs
    num_steps, num_epochs, num_minibatches = ppo.num_steps, ppo.num_epochs, ppo.num_minibatches
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    early_stop = ppo.target_kl is not None
    agent = make_agent(config, env, env_params)
    spec, obs_shape, policy, network = agent.spec, agent.obs_shape, agent.policy, agent.network
    reset_envs, step_envs = agent.reset_envs, agent.step_envs
    env_config = config.env
    observe = functools.partial(network_input, env_config)

    def pmean(tree):
        """Mean over devices, as one all-reduce of the whole tree raveled into a vector."""
        if axis_name is None:
            return tree
        flat, unravel = ravel_pytree(tree)
        return unravel(jax.lax.pmean(flat, axis_name))

    def varying(tree):
        """`tree` typed as per-device values (`shard_map`'s varying), as the envs' states must
        be to stay the carry of a scan, and the parameters are made for the gradient (their
        gradient then stays per device, without an implicit all-reduce in the backward pass;
        `pmean` averages it in one)."""
        if axis_name is None:
            return tree

        def cast(x):
            if axis_name in jax.typeof(x).manual_axis_type.varying:
                return x
            return jax.lax.pcast(x, axis_name, to="varying")

        return jax.tree.map(cast, tree)

    def psum(x):
        return x if axis_name is None else jax.lax.psum(x, axis_name)

    impl = config.prng_impl
    words = key_words(impl)
    as_keys = functools.partial(keys_from_bits, impl=impl)
    noise_shape = policy.noise_shape((num_steps, num_envs))
    shuffle_shape = permutation_bits_shape(num_epochs, batch_size, impl)
    example_obs = np.zeros((1, *obs_shape), np.float32)
    num_kernel_normals = kernel_normal_size(network, example_obs)  # once, not per trace

    def fork(key, shared_shapes, device_shapes):
        """(uint32 bits of `shared_shapes`, the same on every device; bits of `device_shapes`,
        each device its own): one draw on one device, two and a fold-in on several. A key of
        shape `s` is bits of shape `(*s, words)`."""
        if axis_name is None:
            bits = draw_bits(key, *shared_shapes, *device_shapes)
            return bits[:len(shared_shapes)], bits[len(shared_shapes):]
        *shared, device = draw_bits(key, *shared_shapes, (words,))
        device = jax.random.fold_in(as_keys(device), jax.lax.axis_index(axis_name))
        return shared, draw_bits(device, *device_shapes)

    def init(key: jax.Array, hparams: HyperParams) -> RunnerState:
        (init_keys, normal_bits), (env_keys,) = fork(
            convert_key(key, impl), [(2, words), (num_kernel_normals,)], [(num_envs, words)])
        key, params_key = as_keys(init_keys)
        params = init_params(network, params_key, example_obs,
                             normal=normal_from_bits(normal_bits))
        env_keys = as_keys(env_keys)
        opt_state = make_optimizer(hparams.max_grad_norm, hparams.lr).init(
            ravel_pytree(params)[0])
        obs, env_state = varying(reset_envs(env_keys, env_params))
        normalizer = init_normalizer(obs_shape, num_envs)
        normalizer = normalizer._replace(returns=varying(normalizer.returns))
        return RunnerState(params, opt_state, env_state, obs, normalizer, key, jnp.int32(0),
                           hparams)

    def rollout(params, env_state, obs, obs_stats, bits
                ) -> Tuple[Any, jax.Array, Transition, EpisodeSums]:
        """`bits`: uint32 bits of the action noise `noise_shape`, the envs' key `[words]` and
        the reset keys `[T, B, words]`. The completed episodes' sums `[B]` are carried through
        the scan, not stored per step: three fewer outputs for every step to write."""
        # All of the rollout's randomness is drawn up front, outside the scan: on CPU every
        # random op inside the loop costs a small loop of its own per step. That includes the
        # envs' auto-resets when the env can take them (`Agent.draw_resets`). The env keys are
        # a split of their own, which XLA drops when the env's step ignores its key.
        noise_bits, env_key, reset_keys = bits
        noises = policy.noise_from_bits(noise_bits)
        env_key, reset_keys = as_keys(env_key), as_keys(reset_keys)
        env_keys = jax.random.split(env_key, (num_steps, num_envs))
        resets, unpack_resets = None, None
        if agent.draw_resets is not None:  # packed like the carry: fewer arrays to slice
            drawn = agent.draw_resets(reset_keys.reshape(num_steps * num_envs), env_params)
            pack_resets, unpack_resets = batch_packer(drawn)
            resets = jax.tree.map(lambda x: x.reshape(num_steps, num_envs, *x.shape[1:]),
                                  pack_resets(drawn))

        # The carry as one [B, n] array per dtype: XLA:CPU copies every carried leaf each step.
        no_episodes = EpisodeSums(jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32),
                                  jnp.zeros(num_envs, jnp.int32))
        pack, unpack = batch_packer((env_state, obs, no_episodes))

        def step(carry, inputs):
            env_state, obs, sums = unpack(carry)
            action_noise, env_keys, resets = inputs
            if resets is not None:
                resets = unpack_resets(resets)
            if network.shared:  # one trunk gives both
                policy_out, value = network.apply(params, observe(obs_stats, obs))
            else:  # the value tower runs after the rollout, on all its observations at once
                policy_out = network.apply(params, observe(obs_stats, obs),
                                           method=ActorCritic.policy)
                value = None
            action = policy.sample(policy_out, action_noise)
            next_obs, env_state, reward, terminated, truncated, info = step_envs(
                env_keys, env_state, spec.to_env(action), env_params, resets
            )
            done = info["episode_done"]
            transition = Transition(
                jnp.stack([obs, info["final_observation"]]), action,
                policy.log_prob(policy_out, action), value,
                reward.astype(jnp.float32),
                terminated.astype(jnp.uint8) | truncated.astype(jnp.uint8) << 1,
                done if env_config.normalize_reward else None,
            )
            # The wrapper's episode return and length are zero on steps that end no episode.
            sums = EpisodeSums(sums.episode_return + info["episode_return"],
                               sums.episode_length + info["episode_length"], sums.count + done)
            return pack((env_state, next_obs, sums)), transition

        carry, transitions = jax.lax.scan(step, pack((env_state, obs, no_episodes)),
                                          (noises, env_keys, resets))
        env_state, obs, sums = unpack(carry)
        return env_state, obs, transitions, sums

    def minibatch_loss(params, minibatch, hp: HyperParams):
        obs, action, old_log_prob, old_value, advantages, returns = minibatch
        policy_out, value = network.apply(params, obs)
        return ppo_loss(
            policy.log_prob(policy_out, action), policy.entropy(policy_out), value,
            old_log_prob, old_value, advantages, returns,
            clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
            clip_value=ppo.clip_value,
        )

    def learn(flat_params, unravel, opt_state, batch, shuffle_bits, hp: HyperParams
              ) -> _LearnerCarry:
        """All epochs x minibatches as one scan over pre-shuffled minibatches `[E*M, mb, ...]`,
        shuffled by uint32 `shuffle_bits` of `shuffle_shape`.

        It works on the parameters raveled into one vector `flat_params [P]` (`unravel` gives
        the tree), the optimizer's own layout: each step then unravels them once for the
        network (slices that fuse into its matmuls) and updates them in one fused op.
        """
        optimizer = make_optimizer(hp.max_grad_norm, hp.lr)
        grad_fn = jax.value_and_grad(
            lambda flat, minibatch: minibatch_loss(unravel(flat), minibatch, hp), has_aux=True)
        indices = permutations_from_bits(shuffle_bits, batch_size, impl).reshape(
            num_epochs * num_minibatches, minibatch_size)
        obs, action, log_prob, value, advantages, returns = jax.tree.map(
            lambda x: x[indices], batch)
        # Advantages are normalized per minibatch, all minibatches at once (one all-reduce).
        minibatches = (obs, action, log_prob, value,
                       normalize_advantages(advantages, axis_name), returns)

        def take_step(carry: _LearnerCarry, minibatch) -> _LearnerCarry:
            (_, info), grads = grad_fn(varying(carry.params), minibatch)
            grads, info = pmean((grads, info))
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
            return _LearnerCarry(
                params, opt_state, exceeded,
                carry.info_sum + jnp.stack(info),
                carry.computed + 1, carry.taken + jnp.int32(~exceeded), nonfinite,
            )

        def minibatch_step(carry: _LearnerCarry, minibatch):
            if early_stop:
                carry = jax.lax.cond(carry.stopped, lambda c, _: c, take_step, carry, minibatch)
            else:
                carry = take_step(carry, minibatch)
            return carry, None

        carry = _LearnerCarry(flat_params, opt_state, jnp.bool_(False),
                              jnp.zeros(len(LossInfo._fields)), jnp.int32(0), jnp.int32(0),
                              jnp.int32(0))
        return jax.lax.scan(minibatch_step, carry, minibatches)[0]

    def update(state: RunnerState) -> Tuple[RunnerState, Metrics]:
        hp = scheduled_hyperparams(config, state.hparams, state.update)
        (key,), (*rollout_bits, shuffle_bits) = fork(
            state.key, [(words,)], [noise_shape, (words,), (num_steps, num_envs, words),
                                    shuffle_shape])
        key = as_keys(key)
        # One rollout and its learning phase see the statistics from before the rollout;
        # they are updated with its observations / returns afterwards.
        normalizer = state.normalizer
        env_state, obs, tr, episodes = rollout(state.params, state.env_state, state.obs,
                                               normalizer.obs, rollout_bits)
        both_inputs = observe(normalizer.obs, tr.obs_and_next)  # [T, 2, B, ...]
        inputs = both_inputs[:, 0]
        if network.shared:
            next_values = network.apply(state.params, both_inputs[:, 1], 2,
                                        method=ActorCritic.value)
        else:  # one pass of the value tower over the observations and the next ones
            values = network.apply(state.params, both_inputs, 3, method=ActorCritic.value)
            tr = tr._replace(value=values[:, 0])
            next_values = values[:, 1]
        rewards = tr.reward
        if env_config.normalize_reward:
            normalizer, rewards = scale_rewards(normalizer, rewards, tr.episode_done, hp.gamma,
                                                env_config.clip_reward, axis_name)
        advantages, returns = compute_gae(
            rewards, tr.value, next_values, (tr.ends & 1) > 0, (tr.ends & 2) > 0,
            gamma=hp.gamma, gae_lambda=hp.gae_lambda,
        )
        flat = lambda x: x.reshape((batch_size,) + x.shape[2:])  # noqa: E731
        learner_batch = jax.tree.map(
            flat, (inputs, tr.action, tr.log_prob, tr.value, advantages, returns)
        )
        flat_params, unravel = ravel_pytree(state.params)
        learned = learn(flat_params, unravel, state.opt_state, learner_batch, shuffle_bits, hp)
        info = LossInfo(*(learned.info_sum / jnp.maximum(learned.computed, 1)))

        value_mean, return_mean = pmean((tr.value.mean(), returns.mean()))
        residual_var, return_var = pmean(
            (jnp.square(returns - tr.value - (return_mean - value_mean)).mean(),
             jnp.square(returns - return_mean).mean())
        )
        episodes = psum(jax.tree.map(jnp.sum, episodes))
        if env_config.normalize_obs:
            normalizer = normalizer._replace(
                obs=update_running_stats(normalizer.obs, flat(tr.obs_and_next[:, 0]), axis_name))
        metrics = Metrics(
            episode_return_sum=episodes.episode_return,
            episode_length_sum=episodes.episode_length, episode_count=episodes.count,
            policy_loss=info.policy_loss, value_loss=info.value_loss, entropy=info.entropy,
            approx_kl=info.approx_kl, clip_frac=info.clip_frac,
            explained_variance=jnp.where(return_var > 0, 1.0 - residual_var / return_var, 0.0),
            value_mean=value_mean, opt_steps=learned.taken, learning_rate=hp.lr,
            ent_coef=hp.ent_coef, clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, gamma=hp.gamma,
            gae_lambda=hp.gae_lambda,
            nonfinite=learned.nonfinite | _nonfinite_bits(
                (learned.params, 4), (learned.opt_state, 8),
                ((normalizer.obs, normalizer.ret), 16)),
        )
        new_state = RunnerState(unravel(learned.params), learned.opt_state, env_state, obs,
                                normalizer, key, state.update + 1, state.hparams)
        return new_state, metrics

    return PPO(init=init, update=update)


class Program(NamedTuple):
    """The jittable functions of one configured run, mapped over seeds and devices.

    init(key) -> RunnerState with leaves `[S, ...]` (S = num_seeds; env leaves `[S, B, ...]`).
    run(state, num) -> (state, Metrics `[S, chunk]`): `num <= chunk` updates; rows past `num`
        are zeros.
    train(key) -> (RunnerState, Metrics `[S, num_updates]`): the whole run, init and all updates.
    """

    init: Callable[[jax.Array], RunnerState]
    run: Callable[[RunnerState, jax.Array], Tuple[RunnerState, Metrics]]
    train: Callable[[jax.Array], Tuple[RunnerState, Metrics]]
    chunk: int
    num_devices: int


def make_program(config: Config, chunk: Optional[int] = None) -> Program:
    """Builds the run's functions (not yet jitted); `chunk` updates per `run` call."""
    num_devices = jax.local_device_count()
    validate(config, num_devices)
    env, env_params = make_env(config.env)
    axis_name = DEVICE_AXIS if num_devices > 1 else None
    ppo = make_ppo(config, env, env_params, num_envs=config.env.num_envs // num_devices,
                   axis_name=axis_name)
    num_seeds, num_updates = config.num_seeds, config.num_updates
    chunk = num_updates if chunk is None else min(chunk, num_updates)
    hparams = hyperparams_from_config(config)

    def seed_keys(key):
        # Converted first: the PRNG of the run is cheaper to compile than JAX's default one.
        key = convert_key(key, config.prng_impl)
        return key[None] if num_seeds == 1 else jax.random.split(key, num_seeds)

    def seed_hparams():
        return jax.tree.map(lambda x: jnp.broadcast_to(x, (num_seeds,)), hparams)

    def run_one(state: RunnerState, num):
        metrics_shape = jax.eval_shape(ppo.update, state)[1]
        buffer = jax.tree.map(lambda s: jnp.zeros((chunk, *s.shape), s.dtype), metrics_shape)

        def body(i, carry):
            state, buffer = carry
            state, metrics = ppo.update(state)
            return state, jax.tree.map(lambda b, m: b.at[i].set(m), buffer, metrics)

        return jax.lax.fori_loop(0, num, body, (state, buffer))

    def init_seeds(keys, hparams):
        # One seed after another, not vmapped: a vmapped orthogonal init is a batched QR, whose
        # LAPACK kernel can wait forever for XLA:CPU's pool threads when they are all busy.
        return jax.lax.map(lambda args: ppo.init(*args), (keys, hparams))

    def train_updates(state):
        return jax.lax.scan(lambda s, _: ppo.update(s), state, None, num_updates)

    def train_seeds(keys, hparams):
        return map_seeds(train_updates, num_seeds)(init_seeds(keys, hparams))

    mesh = make_mesh(num_devices)
    replicated, env_sharded = P(), P(None, DEVICE_AXIS)  # env leaves are [S, B, ...]
    normalizer_spec = Normalizer(obs=replicated, ret=replicated, returns=env_sharded)
    state_spec = RunnerState(params=replicated, opt_state=replicated, env_state=env_sharded,
                             obs=env_sharded, normalizer=normalizer_spec, key=replicated, update=replicated,
                             hparams=replicated)
    shard = functools.partial(shard_over_devices, mesh=mesh)
    init = shard(init_seeds, in_specs=(replicated, replicated), out_specs=state_spec)
    run = shard(map_seeds(run_one, num_seeds, in_axes=(0, None)),
                in_specs=(state_spec, replicated), out_specs=(state_spec, replicated))
    train = shard(train_seeds, in_specs=(replicated, replicated),
                  out_specs=(state_spec, replicated))
    return Program(
        init=lambda key: init(seed_keys(key), seed_hparams()),
        run=run,
        train=lambda key: train(seed_keys(key), seed_hparams()),
        chunk=chunk,
        num_devices=num_devices,
    )


def make_train(config: Config) -> Callable[[jax.Array], Tuple[RunnerState, Metrics]]:
    """`train(key) -> (RunnerState, Metrics [S, num_updates])`: the whole run, to `jax.jit`."""
    return make_program(config).train
