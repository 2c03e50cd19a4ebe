"""PPO as a pair of pure functions: `make_ppo(...) -> Algorithm(init, update)`, for one seed on
one device (or one device's share of the envs under `shard_map`); the default algorithm of
`purerl.algos.algorithm`'s protocol.

`init(key, hparams) -> RunnerState`; `update(state) -> (state, Metrics)`: a rollout
(`purerl.algos.rollout`), GAE (`purerl.core.gae`), then the learner's epochs x minibatches
(`purerl.algos.learner`), with the metrics reduced to scalars inside the graph. A recurrent policy's
memory rides in the state; its learner gets whole env sequences rather than samples.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp

from purerl.algos.algorithm import Algorithm, Metrics, RunnerState
from purerl.algos.learner import (
    Batch,
    Learner,
    MakeLearner,
    Optimizer,
    adaptive_kl_rate,
    make_learner,
    nonfinite_bits,
    target_kl_stop,
)
from purerl.algos.rollout import RolloutNoise, draws_resets_ahead, rollout
from purerl.config import Config, ConfigError
from purerl.core.collectives import per_device, pmean, psum
from purerl.core.gae import compute_gae
from purerl.core.losses import LossTerm, ppo_term
from purerl.core.prng import (
    convert_key,
    draw_bits_per_device,
    key_words,
    keys_from_bits,
    normal_from_bits,
)
from purerl.core.schedules import HyperParams, make_schedules
from purerl.envs.normalization import init_normalizer, scale_rewards, update_running_stats
from purerl.envs.shaping import shaping_metrics, shaping_schedule
from purerl.nets.agent import Agent, make_agent
from purerl.nets.layers import init_params, kernel_normal_size
from purerl.plan import ExecutionPlan


def make_ppo(
    config: Config, env, env_params, *, num_envs: Optional[int] = None,
    axis_name: Optional[str] = None, optimizer: Optional[Optimizer] = None,
    network=None, loss_terms: Sequence[LossTerm] = (), plan: Optional[ExecutionPlan] = None,
    objective: Optional[LossTerm] = None, learner: Optional[MakeLearner] = None,
) -> Algorithm:
    """PPO for one seed on one device: the default algorithm of `make_program`.

    `update` is a rollout of `ppo.num_steps` steps on each env (`purerl.algos.rollout`), GAE
    (`compute_gae`), then the learner's `ppo.num_epochs` x `ppo.num_minibatches` optimizer
    steps (`purerl.algos.learner`), with the metrics reduced to scalars inside the graph. A
    recurrent policy's memory rides in the state, and its learner takes whole env sequences.

    Args:
        config: the run's settings; PPO reads `env`, `network`, `ppo`, `sweep.target_kl` and
            `prng_impl`.
        env: the unwrapped env, a gymnax `Environment` (`purerl.envs.make_env`).
        env_params: its params.
        num_envs: the envs B this device steps for the seed (default: `env.num_envs`).
        axis_name: the device axis to average gradients and statistics over when a seed's
            envs are split over devices under `shard_map`; None when they are not.
        optimizer: `HyperParams -> optax.GradientTransformation` of the parameter tree
            (default: `purerl.algos.learner.default_optimizer`, Adam after global-norm clipping).
        network: a user's network, a flax module or a factory `(obs_shape, action_spec,
            network_config) -> module` (default: what `config.network` describes).
        loss_terms: loss terms added after PPO's own (`ppo_term`).
        plan: the faster paths to take (default: the default backend's,
            `purerl.plan.execution_plan`).
        objective: a loss term in place of PPO's own clipped objective (`ppo_term`), for a
            variant that keeps PPO's rollout and learner (the target-KL stop, when set, reads
            the `approx_kl` it reports).
        learner: a factory of the learner in place of `make_learner`, called as it is, for
            a variant that learns from the batch in another way (`examples/ppg.py`: a value
            phase after PPO's epochs).

    Returns:
        The `Algorithm(init, update)`, pure functions of arrays: `init(key, hparams)` gives a
            `RunnerState` with `obs` `[num_envs, *obs_shape]`, `update(state)` the next one and
            its `Metrics` of scalars.

    Raises:
        ConfigError: the env's spaces or a user's network do not fit (wrong output shapes, a
            recurrent setting with a network of the user's), `env.reset_pool` is set for an
            env that resets inside its own step, or `env.reward_shaping_horizon` for an env
            with no shaped reward.
    """
    ppo, env_config, impl = config.ppo, config.env, config.prng_impl
    num_envs = env_config.num_envs if num_envs is None else num_envs
    num_steps, pool = ppo.num_steps, env_config.reset_pool
    agent = make_agent(config.env, config.network, env, env_params, network, plan,
                       marl=config.marl)
    scheduled = make_schedules(config.schedules(), config.num_updates)
    if pool and agent.draw_resets is None:
        raise ConfigError(f"env.reset_pool={pool}: env.name={env_config.name!r} resets inside "
                          "its own step, so it cannot take pooled resets")
    early_stop = ppo.target_kl is not None or config.sweep.target_kl is not None
    objective = ppo_term(agent.policy, ppo.clip_value) if objective is None else objective
    num_lanes = num_envs * agent.num_agents  # one per agent of each env
    # the KL-adaptive rate: each member's in its state's `hparams.lr`, carried across updates
    adaptive = ppo.lr_schedule == "adaptive_kl"
    rate_rule = {"rate_rule": adaptive_kl_rate(ppo.desired_kl, ppo.lr_min, ppo.lr_max)
                 } if adaptive else {}
    learner = (make_learner if learner is None else learner)(
        agent, [objective, *loss_terms],
        batch_size=num_lanes if agent.recurrent else num_lanes * num_steps,
        num_epochs=ppo.num_epochs, num_minibatches=ppo.num_minibatches, prng_impl=impl,
        stop_rule=target_kl_stop() if early_stop else None, axis_name=axis_name,
        optimizer=optimizer, **rate_rule)
    draws = _UpdateDraws(agent, num_steps, num_envs, pool, learner.shuffle_shape, impl)
    env_params_at = shaping_schedule(env_config, env_params, num_steps * env_config.num_envs)

    def update(state: RunnerState) -> Tuple[RunnerState, Metrics]:
        hp = scheduled(state.hparams, state.update)
        key, noise, shuffle_bits = draws.draw(state.key, axis_name)
        # One rollout and its learning see the statistics from before the rollout; they are
        # updated with its observations / returns afterwards.
        normalizer = state.normalizer
        step_params = env_params_at(state.update)
        done = rollout(agent, state.params, state.env_state, state.obs, normalizer.obs,
                       step_params, noise, state.memory)
        tr = done.transition
        rewards = tr.reward
        if env_config.normalize_reward:
            normalizer, rewards = scale_rewards(normalizer, rewards, tr.terminated | tr.truncated,
                                                hp.gamma, env_config.clip_reward, axis_name)
        advantages, returns = compute_gae(rewards, tr.value, tr.next_value, tr.terminated,
                                          tr.truncated, gamma=hp.gamma, gae_lambda=hp.gae_lambda)
        samples = _learner_batch(agent, normalizer, tr, advantages, returns, state.memory)
        learned = learner.learn(state.params, state.opt_state, samples, shuffle_bits, hp)
        if env_config.normalize_obs:
            normalizer = normalizer._replace(obs=update_running_stats(
                normalizer.obs, _merge_time_and_envs(tr.obs), axis_name))
        nonfinite = learned.nonfinite | nonfinite_bits(
            (learned.params, 4), (learned.opt_state, 8), ((normalizer.obs, normalizer.ret), 16))
        if adaptive:
            if learned.lr is None:
                raise ValueError("ppo.lr_schedule=adaptive_kl: the learner took no rate_rule "
                                 "(its Learned.lr is None); pass it on to make_learner")
            hp = hp._replace(lr=learned.lr)
        metrics = _metrics(tr.value, returns, done.episodes, learned, hp, nonfinite, axis_name,
                           shaping_metrics(env_config, step_params))
        hparams = state.hparams._replace(lr=learned.lr) if adaptive else state.hparams
        new_state = RunnerState(learned.params, learned.opt_state, done.env_state, done.obs,
                                normalizer, key, state.update + 1, hparams, done.memory)
        return new_state, metrics

    return Algorithm(init=_make_init(agent, learner, env_params, num_envs, impl, axis_name),
                     update=update, agent=agent)


def _make_init(agent: Agent, learner: Learner, env_params, num_envs: int, impl: str,
               axis_name: Optional[str]):
    """`init(key, hparams) -> RunnerState`: the network's params, the optimizer's state, the
    `num_envs` envs reset, fresh normalization statistics and memory."""
    words, one_draw = key_words(impl), agent.plan.one_draw_init
    example_inputs = agent.example_inputs()
    # once, not per trace
    num_kernel_normals = kernel_normal_size(agent.network, *example_inputs, one_draw=one_draw)

    def init(key: jax.Array, hparams: HyperParams) -> RunnerState:
        (init_keys, normal_bits), (env_keys,) = draw_bits_per_device(
            convert_key(key, impl), [(2, words), (num_kernel_normals,)], [(num_envs, words)],
            impl, axis_name)
        key, params_key = keys_from_bits(init_keys, impl)
        params = init_params(agent.network, params_key, *example_inputs,
                             normal=normal_from_bits(normal_bits), one_draw=one_draw)
        opt_state = learner.init_opt_state(params, hparams)
        obs, env_state = per_device(
            agent.reset_envs(keys_from_bits(env_keys, impl), env_params), axis_name)
        num_lanes = num_envs * agent.num_agents
        normalizer = init_normalizer(agent.obs_shape, num_lanes)
        normalizer = normalizer._replace(returns=per_device(normalizer.returns, axis_name))
        memory = per_device(agent.initial_memory(num_lanes), axis_name)
        return RunnerState(params, opt_state, env_state, obs, normalizer, key, jnp.int32(0),
                           hparams, memory)

    return init


class _UpdateDraws:
    """An update's randomness, each device its own, as bits from one draw: the action noise,
    the envs' key, the keys of their auto-resets when drawn ahead, a reset pool's keys and each
    env's choice among them, the shuffle of the learner's batch."""

    def __init__(self, agent: Agent, num_steps: int, num_envs: int, pool: int,
                 shuffle_shape: Tuple[int, ...], impl: str):
        words = key_words(impl)
        self.agent, self.pool, self.impl = agent, pool, impl
        self.resets_ahead = not pool and draws_resets_ahead(agent, num_steps, num_envs)
        self.shapes = {
            "noise": agent.policy.noise_shape((num_steps, num_envs * agent.num_agents)),
            "env_key": (words,),
            **({"reset_keys": (num_steps, num_envs, words)} if self.resets_ahead else {}),
            **({"pool_keys": (num_steps, pool, words), "pool_choice": (num_steps, num_envs)}
               if pool else {}),
            "shuffle": shuffle_shape,
        }

    def draw(self, key: jax.Array, axis_name: Optional[str]):
        """`(next key, RolloutNoise, shuffle bits)` from the state's `key`."""
        impl, pool = self.impl, self.pool
        (next_key,), drawn = draw_bits_per_device(key, [(key_words(impl),)],
                                                  list(self.shapes.values()), impl, axis_name)
        bits = dict(zip(self.shapes, drawn))
        noise = RolloutNoise(self.agent.policy.noise_from_bits(bits["noise"]),
                             keys_from_bits(bits["env_key"], impl),
                             keys_from_bits(bits["reset_keys"], impl) if self.resets_ahead
                             else None)
        if pool:  # the pool's keys, and a uniform choice among its N resets for each env
            noise = noise._replace(pool_keys=keys_from_bits(bits["pool_keys"], impl),
                                   pool_choice=(bits["pool_choice"] % pool).astype(jnp.int32))
        return keys_from_bits(next_key, impl), noise, bits["shuffle"]


def _learner_batch(agent: Agent, normalizer, tr, advantages: jax.Array, returns: jax.Array,
                   memory) -> Batch:
    """The rollout's `[T, B]` transitions as the learner's `Batch`: samples `[T * B, ...]`, or
    for a recurrent agent whole sequences replayed from `memory`, the rollout's first carry."""
    samples = Batch(agent.observe(normalizer.obs, tr.obs), tr.action, tr.log_prob, tr.value,
                    advantages, returns, action_mask=agent.action_mask(tr.obs))
    if not agent.recurrent:
        return jax.tree.map(_merge_time_and_envs, samples)
    first = jnp.concatenate([memory.first[None], (tr.terminated | tr.truncated)[:-1]])
    return samples._replace(first=first, carry=memory.carry)


def _merge_time_and_envs(x: jax.Array) -> jax.Array:
    """`[T, B, ...]` -> `[T * B, ...]`."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def _metrics(values, returns, episodes, learned, hp: HyperParams, nonfinite,
             axis_name: Optional[str], extra: Dict[str, jax.Array]) -> Metrics:
    """The update's `Metrics` from the rollout's values and returns `[T, B]`, its completed
    episodes' sums `[B]`, the learner's result and `extra` scalars; pooled over the devices
    of `axis_name`."""
    value_mean, return_mean = pmean((values.mean(), returns.mean()), axis_name)
    residual_var, return_var = pmean(
        (jnp.square(returns - values - (return_mean - value_mean)).mean(),
         jnp.square(returns - return_mean).mean()), axis_name)
    episodes = psum(jax.tree.map(jnp.sum, episodes), axis_name)
    scalars = {
        **learned.info,
        "explained_variance": jnp.where(return_var > 0, 1.0 - residual_var / return_var, 0.0),
        "value_mean": value_mean, "opt_steps": learned.opt_steps, "learning_rate": hp.lr,
        "ent_coef": hp.ent_coef, "clip_eps": hp.clip_eps, "vf_coef": hp.vf_coef,
        "gamma": hp.gamma, "gae_lambda": hp.gae_lambda, **extra,
    }
    return Metrics(episode_return_sum=episodes.episode_return,
                   episode_length_sum=episodes.episode_length, episode_count=episodes.count,
                   nonfinite=nonfinite, scalars=scalars, episode_outcome_sums=episodes.outcomes)
