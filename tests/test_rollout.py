"""The rollout alone, on a probe env whose every transition can be checked by hand."""

import jax
import numpy as np
import pytest

import purerl.algos.rollout
from purerl.algos.rollout import RolloutNoise, rollout
from purerl.envs import make_env
from purerl.envs.normalization import init_running_stats
from purerl.nets.agent import make_agent
from purerl.nets.layers import init_params
from purerl.nets.networks import ActorCritic
from purerl.plan import PLAIN

NUM_STEPS, NUM_ENVS = 24, 8
CHAIN_END, TIME_LIMIT = 4, 10  # custom_envs.Chain's default params


@pytest.fixture(scope="module")
def chain_agent():
    from conftest import tiny_config

    config = tiny_config(**{"env.name": "custom_envs:Chain", "env.num_envs": NUM_ENVS})
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params)
    params = init_params(agent.network, jax.random.key(1),
                         np.zeros((1, *agent.obs_shape), np.float32))
    return agent, params, env_params


# The plain plan laid out as PureJaxRL's rollout is: the value with the policy at each step,
# each step's next value too, and the two towers as two MLPs.
PUREJAXRL_LAYOUT = PLAIN._replace(value_in_step=True, next_value_in_step=True,
                                  towers_apart=True)


@pytest.mark.parametrize("resets_drawn_ahead, value_pass_samples, plan",
                         [(True, None, None), (False, 48, None), (False, None, PUREJAXRL_LAYOUT)])
def test_rollout_transitions_follow_the_chain(chain_agent, resets_drawn_ahead,
                                              value_pass_samples, plan, monkeypatch):
    """Chain: the position (the one-hot observation) moves by the action; reaching position 4
    terminates with reward 1; the 10th step of an episode truncates it. Values come from one
    pass after the scan, or (48 samples at most: 3 steps of 2 x 8) from 8 chunks of it, or
    with PureJaxRL's layout from the steps."""
    if value_pass_samples is not None:
        monkeypatch.setattr(purerl.algos.rollout, "MAX_VALUE_PASS_SAMPLES", value_pass_samples)
    agent, params, env_params = chain_agent
    if plan is not None:  # the same network and params, run as two MLPs
        agent = agent._replace(plan=plan, network=agent.network.clone(towers_apart=True))
    keys = jax.random.split(jax.random.key(0), 4)
    obs, env_state = agent.reset_envs(jax.random.split(keys[0], NUM_ENVS), env_params)
    noise = RolloutNoise(
        agent.policy.noise(keys[1], (NUM_STEPS, NUM_ENVS)), keys[2],
        jax.random.split(keys[3], (NUM_STEPS, NUM_ENVS)) if resets_drawn_ahead else None)
    stats = init_running_stats(agent.obs_shape)
    out = jax.jit(lambda *args: rollout(agent, *args))(params, env_state, obs, stats,
                                                       env_params, noise)
    tr = jax.tree.map(np.asarray, out.transition)
    for name in tr._fields:
        assert getattr(tr, name).shape[:2] == (NUM_STEPS, NUM_ENVS), name

    position, next_position = tr.obs.argmax(-1), tr.next_obs.argmax(-1)
    np.testing.assert_array_equal(next_position, position + tr.action[..., 0])  # one control
    np.testing.assert_array_equal(tr.terminated, next_position == CHAIN_END)
    np.testing.assert_array_equal(tr.reward, tr.terminated.astype(np.float32))
    ended = tr.terminated | tr.truncated
    step_in_episode = np.zeros(NUM_ENVS, int)
    returns, counts = np.zeros(NUM_ENVS), np.zeros(NUM_ENVS, int)
    for t in range(NUM_STEPS):
        step_in_episode += 1
        np.testing.assert_array_equal(tr.truncated[t] & ~tr.terminated[t],
                                      (step_in_episode == TIME_LIMIT) & ~tr.terminated[t])
        following = tr.obs[t + 1] if t + 1 < NUM_STEPS else np.asarray(out.obs)
        # after an episode's end the env restarts at position 0, else it goes on from next_obs
        np.testing.assert_array_equal(following.argmax(-1),
                                      np.where(ended[t], 0, next_position[t]))
        returns += np.where(ended[t], tr.reward[t], 0.0)  # Chain's reward comes at the end only
        counts += ended[t]
        step_in_episode[ended[t]] = 0
    assert tr.terminated.any() and (tr.truncated & ~tr.terminated).any()  # both kinds of end
    np.testing.assert_array_equal(np.asarray(out.episodes.count), counts)
    np.testing.assert_allclose(np.asarray(out.episodes.episode_return), returns)

    # value, next_value and log_prob are the network's, for the stored observations;
    flat = lambda x: x.reshape(NUM_STEPS * NUM_ENVS, *x.shape[2:])  # noqa: E731
    policy_out, value = agent.network.apply(params, flat(tr.obs))
    # a terminal state's value is 0; every other step's next value is V of its true next obs
    next_value = np.where(flat(tr.terminated), 0.0,
                          agent.network.apply(params, flat(tr.next_obs), method=ActorCritic.value))
    log_prob = agent.policy.log_prob(policy_out, flat(tr.action))
    for name, expected in (("value", value), ("next_value", next_value), ("log_prob", log_prob)):
        np.testing.assert_allclose(flat(getattr(tr, name)), expected, rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("network", [{"network.shared": True},
                                     {"network.rnn": "gru", "network.rnn_size": 8}])
@pytest.mark.parametrize("plan", [None, PUREJAXRL_LAYOUT])
def test_next_values_of_a_shared_trunk_and_a_recurrent_policy(network, plan):
    """The next value of every step, against the network applied step by step: V of the true
    next observation (a recurrent policy's after that step's carry, not reset), 0 at a
    terminal state. Chain's episodes end every few steps, truncated or terminated, some of
    them before an env's last step (whose next values take a round of their own, or with
    PureJaxRL's layout come from the steps)."""
    from conftest import tiny_config

    config = tiny_config(**{"env.name": "custom_envs:Chain", "env.num_envs": NUM_ENVS,
                            **network})
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params, plan=plan)
    keys = jax.random.split(jax.random.key(0), 4)
    obs, env_state = agent.reset_envs(jax.random.split(keys[0], NUM_ENVS), env_params)
    memory = agent.initial_memory(NUM_ENVS)
    init_args = (obs,) if memory is None else (memory.carry, obs, memory.first)
    params = init_params(agent.network, jax.random.key(1), *init_args)
    noise = RolloutNoise(agent.policy.noise(keys[1], (NUM_STEPS, NUM_ENVS)), keys[2], None)
    stats = init_running_stats(agent.obs_shape)
    out = jax.jit(lambda *args: rollout(agent, *args))(params, env_state, obs, stats,
                                                       env_params, noise, memory)
    tr = jax.tree.map(np.asarray, out.transition)
    assert (tr.truncated & ~tr.terminated)[:-1].any() and tr.terminated.any()

    carry, first = (None, None) if memory is None else memory
    for t in range(NUM_STEPS):
        if carry is None:
            value = agent.network.apply(params, tr.obs[t])[1]
            next_value = agent.network.apply(params, tr.next_obs[t])[1]
        else:
            carry, _, value = agent.network.apply(params, carry, tr.obs[t], first)
            next_value = agent.network.apply(params, carry, tr.next_obs[t],
                                             np.zeros(NUM_ENVS, bool), method="value")
            first = tr.terminated[t] | tr.truncated[t]
        np.testing.assert_allclose(tr.value[t], value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tr.next_value[t], np.where(tr.terminated[t], 0, next_value),
                                   rtol=1e-5, atol=1e-6, err_msg=f"step {t}")


@pytest.mark.parametrize("pool", [0, 1, 3])
def test_reset_pool_shares_fresh_resets_among_the_envs(pool):
    """`env.reset_pool=N`: each step makes N fresh resets and every env whose episode ends
    starts from one of them (0: each its own). RandomStart's episodes all end together, every
    3 steps, at a random start that they keep."""
    from conftest import tiny_config

    config = tiny_config(**{"env.name": "custom_envs:RandomStart", "env.num_envs": NUM_ENVS,
                            "env.reset_pool": pool})
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params)
    params = init_params(agent.network, jax.random.key(1),
                         np.zeros((1, *agent.obs_shape), np.float32))
    keys = jax.random.split(jax.random.key(0), 5)
    obs, env_state = agent.reset_envs(jax.random.split(keys[0], NUM_ENVS), env_params)
    noise = RolloutNoise(agent.policy.noise(keys[1], (NUM_STEPS, NUM_ENVS)), keys[2], None)
    if pool:
        noise = noise._replace(
            pool_keys=jax.random.split(keys[3], (NUM_STEPS, pool)),
            pool_choice=jax.random.randint(keys[4], (NUM_STEPS, NUM_ENVS), 0, pool))
    out = jax.jit(lambda *args: rollout(agent, *args))(
        params, env_state, obs, init_running_stats(agent.obs_shape), env_params, noise)
    tr = jax.tree.map(np.asarray, out.transition)
    assert tr.truncated[2::3].all() and not tr.truncated[np.arange(NUM_STEPS) % 3 != 2].any()
    starts = tr.obs[3::3]  # [episodes after the first, B, 2]
    for t, episode_starts in enumerate(starts):
        distinct = len(np.unique(episode_starts, axis=0))
        if pool:  # one of the step's pool, as the choice says
            assert distinct <= pool
            chosen = np.asarray(noise.pool_choice[3 * t + 2])
            for b in range(NUM_ENVS):
                same = episode_starts[chosen == chosen[b]]
                np.testing.assert_array_equal(same, np.broadcast_to(episode_starts[b], same.shape))
        else:
            assert distinct == NUM_ENVS
    assert len(np.unique(starts.reshape(-1, 2), axis=0)) > (pool or NUM_ENVS)  # fresh each time
