"""PPO as a pair of pure functions: `make_ppo(...) -> PPO(init, update)`, for one seed on one
device (or one device's share of the envs under `shard_map`).

`init(key, hparams) -> RunnerState`; `update(state) -> (state, Metrics)`: a rollout
(`purerl.rollout`), GAE (`purerl.gae`), then the learner's epochs x minibatches
(`purerl.learner`), with the metrics reduced to scalars inside the graph. A recurrent policy's
memory rides in the state; its learner gets whole env sequences rather than samples.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from purerl.agent import Memory, make_agent
from purerl.config import Config, ConfigError
from purerl.envs.normalization import (
    Normalizer, init_normalizer, scale_rewards, update_running_stats,
)
from purerl.gae import compute_gae
from purerl.learner import Batch, make_learner, make_optimizer, nonfinite_bits
from purerl.networks import init_params, kernel_normal_size
from purerl.parallel import per_device, pmean, psum
from purerl.prng import convert_key, draw_bits_per_device, key_words, keys_from_bits, normal_from_bits
from purerl.rollout import RolloutNoise, draws_resets_ahead, rollout
from purerl.schedules import HyperParams, scheduled_hyperparams


class RunnerState(NamedTuple):
    """Everything a run carries from one update to the next (one seed, one device's envs)."""

    params: Any
    opt_state: Any  # of the params raveled into one vector
    env_state: Any  # [B] env states (B = envs on this device)
    obs: jax.Array  # [B, *obs_shape], as the env returned it (before normalization)
    normalizer: Normalizer  # running observation / return statistics (unused when off)
    key: jax.Array  # typed PRNG key, the same on every device
    update: jax.Array  # int32 [], updates done so far
    hparams: HyperParams  # base (unscheduled) hyperparameters
    memory: Optional[Memory] = None  # [B], a recurrent policy's; None for a feed-forward one


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
    nonfinite: jax.Array  # int32 bit mask, 0 when all is well; see learner.NONFINITE_QUANTITIES

    @property
    def episode_return(self) -> jax.Array:
        """The mean return of the episodes completed in the update (NaN where none were)."""
        return _mean_per_episode(self.episode_return_sum, self.episode_count)

    @property
    def episode_length(self) -> jax.Array:
        """The mean length of the episodes completed in the update (NaN where none were)."""
        return _mean_per_episode(self.episode_length_sum, self.episode_count)


def _mean_per_episode(total: jax.Array, count: jax.Array) -> jax.Array:
    return jnp.where(count > 0, total / jnp.maximum(count, 1), jnp.nan)


class PPO(NamedTuple):
    init: Callable[[jax.Array, HyperParams], RunnerState]
    update: Callable[[RunnerState], Tuple[RunnerState, Metrics]]


def make_ppo(
    config: Config, env, env_params, *, num_envs: Optional[int] = None,
    axis_name: Optional[str] = None,
) -> PPO:
    """PPO for one seed over `num_envs` envs (default: all); `axis_name` names the device axis
    to average gradients and metrics over, when running under `shard_map`."""
    ppo, env_config, impl = config.ppo, config.env, config.prng_impl
    num_envs = env_config.num_envs if num_envs is None else num_envs
    num_steps, words = ppo.num_steps, key_words(impl)
    agent = make_agent(config, env, env_params)
    if env_config.reset_pool and agent.draw_resets is None:
        raise ConfigError(f"env.reset_pool={env_config.reset_pool}: env.name={env_config.name!r} "
                          "resets inside its own step, so it cannot take pooled resets")
    recurrent = agent.recurrent
    early_stop = ppo.target_kl is not None or config.sweep.target_kl is not None
    learner = make_learner(agent, batch_size=num_envs if recurrent else num_envs * num_steps,
                           num_epochs=ppo.num_epochs,
                           num_minibatches=ppo.num_minibatches, clip_value=ppo.clip_value,
                           early_stop=early_stop, prng_impl=impl, axis_name=axis_name)
    example_inputs = agent.example_inputs()
    num_kernel_normals = kernel_normal_size(agent.network, *example_inputs)  # once, not per trace
    # The update's randomness, each device its own: the action noise, the envs' key, the keys
    # of their auto-resets when drawn ahead (else none), the shuffle of the learner's batch.
    pool = env_config.reset_pool
    reset_keys_shape = ((num_steps, num_envs, words)
                        if not pool and draws_resets_ahead(agent, num_steps, num_envs) else None)
    pool_shapes = [(num_steps, pool, words), (num_steps, num_envs)] if pool else []
    update_shapes = [agent.policy.noise_shape((num_steps, num_envs)), (words,),
                     reset_keys_shape, *pool_shapes, learner.shuffle_shape]
    as_keys = lambda bits: keys_from_bits(bits, impl)  # noqa: E731

    def init(key: jax.Array, hparams: HyperParams) -> RunnerState:
        (init_keys, normal_bits), (env_keys,) = draw_bits_per_device(
            convert_key(key, impl), [(2, words), (num_kernel_normals,)], [(num_envs, words)],
            impl, axis_name)
        key, params_key = as_keys(init_keys)
        params = init_params(agent.network, params_key, *example_inputs,
                             normal=normal_from_bits(normal_bits))
        opt_state = make_optimizer(hparams.max_grad_norm, hparams.lr).init(
            ravel_pytree(params)[0])
        obs, env_state = per_device(agent.reset_envs(as_keys(env_keys), env_params), axis_name)
        normalizer = init_normalizer(agent.obs_shape, num_envs)
        normalizer = normalizer._replace(returns=per_device(normalizer.returns, axis_name))
        memory = per_device(agent.initial_memory(num_envs), axis_name)
        return RunnerState(params, opt_state, env_state, obs, normalizer, key, jnp.int32(0),
                           hparams, memory)

    def update(state: RunnerState) -> Tuple[RunnerState, Metrics]:
        hp = scheduled_hyperparams(config, state.hparams, state.update)
        (key,), bits = draw_bits_per_device(
            state.key, [(words,)], [shape for shape in update_shapes if shape is not None],
            impl, axis_name)
        noise_bits, env_key, *reset_bits, shuffle_bits = bits
        noise = RolloutNoise(agent.policy.noise_from_bits(noise_bits), as_keys(env_key),
                             as_keys(reset_bits[0]) if reset_keys_shape else None)
        if pool:  # the pool's keys, and a uniform choice among its N resets for each env
            pool_keys, choice_bits = reset_bits
            noise = noise._replace(pool_keys=as_keys(pool_keys),
                                   pool_choice=(choice_bits % pool).astype(jnp.int32))
        # One rollout and its learning see the statistics from before the rollout; they are
        # updated with its observations / returns afterwards.
        normalizer = state.normalizer
        done = rollout(agent, state.params, state.env_state, state.obs, normalizer.obs,
                       env_params, noise, state.memory)
        tr = done.transition
        rewards = tr.reward
        if env_config.normalize_reward:
            normalizer, rewards = scale_rewards(normalizer, rewards, tr.terminated | tr.truncated,
                                                hp.gamma, env_config.clip_reward, axis_name)
        advantages, returns = compute_gae(rewards, tr.value, tr.next_value, tr.terminated,
                                          tr.truncated, gamma=hp.gamma, gae_lambda=hp.gae_lambda)
        samples = Batch(agent.observe(normalizer.obs, tr.obs), tr.action, tr.log_prob, tr.value,
                        advantages, returns, action_mask=agent.action_mask(tr.obs))
        if recurrent:  # whole sequences, replayed from the rollout's first carry
            start = state.memory
            first = jnp.concatenate([start.first[None], (tr.terminated | tr.truncated)[:-1]])
            samples = samples._replace(first=first, carry=start.carry)
        else:
            samples = jax.tree.map(_merge_time_and_envs, samples)
        learned = learner.learn(state.params, state.opt_state, samples, shuffle_bits, hp)
        if env_config.normalize_obs:
            normalizer = normalizer._replace(obs=update_running_stats(
                normalizer.obs, _merge_time_and_envs(tr.obs), axis_name))
        nonfinite = learned.nonfinite | nonfinite_bits(
            (learned.params, 4), (learned.opt_state, 8), ((normalizer.obs, normalizer.ret), 16))
        metrics = _metrics(tr.value, returns, done.episodes, learned, hp, nonfinite, axis_name)
        new_state = RunnerState(learned.params, learned.opt_state, done.env_state, done.obs,
                                normalizer, as_keys(key), state.update + 1, state.hparams,
                                done.memory)
        return new_state, metrics

    return PPO(init=init, update=update)


def _merge_time_and_envs(x: jax.Array) -> jax.Array:
    """`[T, B, ...]` -> `[T * B, ...]`."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def _metrics(values, returns, episodes, learned, hp: HyperParams, nonfinite,
             axis_name: Optional[str]) -> Metrics:
    """The update's `Metrics` from the rollout's values and returns `[T, B]`, its completed
    episodes' sums `[B]`, and the learner's result; pooled over the devices of `axis_name`."""
    value_mean, return_mean = pmean((values.mean(), returns.mean()), axis_name)
    residual_var, return_var = pmean(
        (jnp.square(returns - values - (return_mean - value_mean)).mean(),
         jnp.square(returns - return_mean).mean()), axis_name)
    episodes = psum(jax.tree.map(jnp.sum, episodes), axis_name)
    info = learned.info
    return Metrics(
        episode_return_sum=episodes.episode_return,
        episode_length_sum=episodes.episode_length, episode_count=episodes.count,
        policy_loss=info.policy_loss, value_loss=info.value_loss, entropy=info.entropy,
        approx_kl=info.approx_kl, clip_frac=info.clip_frac,
        explained_variance=jnp.where(return_var > 0, 1.0 - residual_var / return_var, 0.0),
        value_mean=value_mean, opt_steps=learned.opt_steps, learning_rate=hp.lr,
        ent_coef=hp.ent_coef, clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, gamma=hp.gamma,
        gae_lambda=hp.gae_lambda, nonfinite=nonfinite,
    )
