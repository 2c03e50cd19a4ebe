"""Evaluation episodes at temperatures, on the Chain env with hand-set policies."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from purerl.algos.evaluation import eval_max_steps, make_evaluator
from purerl.envs import make_env
from purerl.envs.normalization import init_running_stats
from purerl.nets.agent import make_agent
from purerl.parallel.program import make_program


def _evaluator(config, env, env_params):
    return make_evaluator(make_agent(config.env, config.network, env, env_params), env_params,
                          config.eval)


def _chain_policy(config, right_logit: float):
    """Params whose policy ignores the observation: logits [0, right_logit]."""
    params = jax.eval_shape(make_program(config).init, jax.random.key(0)).params
    params = jax.tree.map(lambda x: jnp.zeros(x.shape[1:], x.dtype), params)
    towers = params["params"]["towers"]
    towers["bias_head"] = towers["bias_head"].at[0, 0].set(jnp.array([0.0, right_logit]))
    return params


def test_greedy_and_sampled_episodes_on_the_chain(make_config):
    """Walking right 4 times reaches the end (+1); the other action stays. Greedy with logits
    [0, 2] always walks right; at temperature 1 it stays w.p. 0.12 (a wasted step); at
    temperature 50 it walks right w.p. 0.51 and must do so 4 times in the 10-step limit."""
    config = make_config(**{"env.name": "custom_envs:Chain", "eval.num_episodes": 256,
                            "eval.temperatures": [0.0, 1.0, 50.0]})
    env, env_params = make_env(config.env)
    evaluate = jax.jit(_evaluator(config, env, env_params).evaluate)
    result = evaluate(_chain_policy(config, 2.0), init_running_stats((5,)), jax.random.key(1))
    returns, lengths = np.asarray(result.episode_return), np.asarray(result.episode_length)
    assert returns[0] == 1.0 and lengths[0] == 4.0
    p_left = 1 / (1 + np.e ** 2)
    expected_length = 4 / (1 - p_left)  # geometric wasted steps (the 10-step cap rarely binds)
    assert abs(lengths[1] - expected_length) < 0.3 and returns[1] > 0.95
    p_right = 1 / (1 + np.exp(-2.0 / 50))
    p_success = sum(math.comb(10, k) * p_right ** k * (1 - p_right) ** (10 - k)
                    for k in range(4, 11))
    assert abs(returns[2] - p_success) < 0.1 and lengths[2] > 6.0


def test_max_steps_cuts_episodes(make_config):
    config = make_config(**{"env.name": "custom_envs:Chain", "eval.num_episodes": 4,
                            "eval.temperatures": [0.0], "eval.max_steps": 2})
    env, env_params = make_env(config.env)
    assert eval_max_steps(config.eval, env_params) == 2
    assert eval_max_steps(make_config(**{"env.name": "custom_envs:Chain"}).eval, env_params) == 10
    result = _evaluator(config, env, env_params).evaluate(
        _chain_policy(config, 2.0), init_running_stats((5,)), jax.random.key(0))
    assert float(result.episode_return[0]) == 0.0 and float(result.episode_length[0]) == 2.0
