"""The learner alone: one update's epochs x minibatches on a batch made by hand."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purerl.algos.learner import adaptive_kl_rate, make_learner, make_optimizer, target_kl_stop
from purerl.core.losses import Batch, ppo_term
from purerl.core.prng import SHUFFLE_ROUNDS, draw_bits
from purerl.core.schedules import hyperparams_from_config
from purerl.envs import make_env
from purerl.nets.agent import make_agent
from purerl.nets.layers import init_params
from purerl.plan import PLAIN

BATCH = 64


@pytest.fixture(scope="module")
def setup():
    from conftest import tiny_config

    config = tiny_config()
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params)
    params = init_params(agent.network, jax.random.key(1),
                         np.zeros((1, *agent.obs_shape), np.float32))
    keys = jax.random.split(jax.random.key(2), 4)
    obs = jax.random.normal(keys[0], (BATCH, *agent.obs_shape))
    action = jax.random.bernoulli(keys[1], shape=(BATCH, 1)).astype(jnp.int32)
    policy_out, value = agent.network.apply(params, obs)
    batch = Batch(obs, action, agent.policy.log_prob(policy_out, action), value,
                  advantages=jax.random.normal(keys[2], (BATCH,)),
                  returns=value + jax.random.normal(keys[3], (BATCH,)))
    return config, agent, params, batch


def _learn(config, agent, params, batch, *, epochs, minibatches, target_kl=None,
           optimizer=None):
    learner = make_learner(agent, [ppo_term(agent.policy, clip_value=True)], batch_size=BATCH,
                           num_epochs=epochs, num_minibatches=minibatches,
                           stop_rule=None if target_kl is None else target_kl_stop(),
                           prng_impl=config.prng_impl, optimizer=optimizer)
    hp = hyperparams_from_config(config)._replace(lr=jnp.float32(1e-2))
    if target_kl is not None:
        hp = hp._replace(target_kl=jnp.float32(target_kl))
    opt_state = learner.init_opt_state(params, hp)
    (bits,) = draw_bits(jax.random.key(3, impl=config.prng_impl), learner.shuffle_shape)
    return jax.jit(learner.learn)(params, opt_state, batch, bits, hp)


def test_first_step_sees_the_rollout_policy(setup):
    """One minibatch step: its loss statistics are measured before the step, on the policy
    that made the batch, so the ratio is exactly 1 (approx KL 0, nothing clipped), and the
    losses are what the formulas give with ratio 1."""
    config, agent, params, batch = setup
    learned = _learn(config, agent, params, batch, epochs=1, minibatches=1)
    info = {name.removeprefix("loss/"): float(value) for name, value in learned.info.items()}
    assert info["approx_kl"] == 0.0 and info["clip_frac"] == 0.0
    advantages = np.asarray(batch.advantages, np.float64)
    normalized = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    assert info["policy_loss"] == pytest.approx(-normalized.mean(), abs=1e-6)
    errors = np.asarray(batch.value) - np.asarray(batch.returns)
    assert info["value_loss"] == pytest.approx(0.5 * np.mean(errors ** 2), rel=1e-5)
    entropy = agent.policy.entropy(agent.network.apply(params, batch.obs)[0])
    assert info["entropy"] == pytest.approx(float(entropy.mean()), rel=1e-5)
    assert int(learned.opt_steps) == 1 and int(learned.nonfinite) == 0
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), learned.params, params)
    assert all(jax.tree.leaves(moved))  # one Adam step moves every parameter


def test_target_kl_stops_the_update(setup):
    config, agent, params, batch = setup
    assert int(_learn(config, agent, params, batch, epochs=4, minibatches=2).opt_steps) == 8
    stopped = _learn(config, agent, params, batch, epochs=4, minibatches=2, target_kl=1e-9)
    assert int(stopped.opt_steps) == 1  # the first step (KL 0) always runs


def test_the_adaptive_kl_rate_follows_a_hand_computed_sequence():
    """rsl_rl's rule at desired KL 0.01 within [1e-4, 2e-3], from 1e-3: each KL moves the
    rate as written beside it."""
    rule = adaptive_kl_rate(desired_kl=0.01, lr_min=1e-4, lr_max=2e-3)
    steps = [  # (the step's KL, the rate after it)
        (0.0, 1e-3),  # an update's first step: KL 0, kept
        (0.03, 1e-3 / 1.5),  # > 2 x 0.01: down
        (0.02, 1e-3 / 1.5),  # not above 0.02: kept
        (0.004, 1e-3),  # < 0.01 / 2: up
        (0.005, 1e-3),  # not below 0.005: kept
        (0.001, 1.5e-3),
        (0.001, 2e-3),  # 2.25e-3 is past lr_max
        (0.001, 2e-3),
        *[(0.5, 2e-3 / 1.5 ** k) for k in range(1, 8)],  # 1.33e-3 ... 1.17e-4
        (0.5, 1e-4),  # 7.8e-5 is below lr_min
        (0.5, 1e-4),
    ]
    kls = jnp.asarray([kl for kl, _ in steps], jnp.float32)
    rates = jax.jit(lambda kls: jax.lax.scan(
        lambda lr, kl: (lambda new: (new, new))(rule({"loss/approx_kl": kl}, lr)),
        jnp.float32(1e-3), kls)[1])(kls)
    np.testing.assert_allclose(rates, [rate for _, rate in steps], rtol=1e-6)
    with pytest.raises(ValueError, match="adaptive_kl reads loss/approx_kl, which no loss term"):
        rule({"loss/kl": jnp.float32(0.0)}, jnp.float32(1e-3))


def test_each_step_runs_at_the_rate_its_own_kl_sets(setup):
    """A term whose gradient is 1 for every parameter and whose KL is 0.001 (below half of
    0.01), with SGD: the 4 steps run at 1e-3 x 1.5, 1.5^2, 1.5^3, 1.5^4 (each step's KL moves
    the rate before its own update, as Brax's and rsl_rl's), so every parameter falls by
    their sum, and the update ends at the last one."""
    import optax

    config, agent, params, batch = setup

    def term(params, minibatch, outputs, hp):
        return (sum(jnp.sum(leaf) for leaf in jax.tree.leaves(params)),
                {"approx_kl": jnp.float32(0.001)})

    learner = make_learner(agent, [term], batch_size=BATCH, num_epochs=2, num_minibatches=2,
                           prng_impl=config.prng_impl, optimizer=lambda hp: optax.sgd(hp.lr),
                           rate_rule=adaptive_kl_rate(0.01, 1e-5, 1e-2))
    hp = hyperparams_from_config(config)._replace(lr=jnp.float32(1e-3))
    (bits,) = draw_bits(jax.random.key(3, impl=config.prng_impl), learner.shuffle_shape)
    learned = jax.jit(learner.learn)(params, learner.init_opt_state(params, hp), batch, bits,
                                     hp)
    rates = [1e-3 * 1.5 ** k for k in range(1, 5)]
    assert float(learned.lr) == pytest.approx(rates[-1], rel=1e-6)
    for new, old in zip(jax.tree.leaves(learned.params), jax.tree.leaves(params)):
        np.testing.assert_allclose(new, old - sum(rates), rtol=1e-5, atol=1e-6)
    fixed = make_learner(agent, [term], batch_size=BATCH, num_epochs=1, num_minibatches=2,
                         prng_impl=config.prng_impl)
    assert fixed.learn(params, fixed.init_opt_state(params, hp), batch,
                       draw_bits(jax.random.key(3, impl=config.prng_impl),
                                 fixed.shuffle_shape)[0], hp).lr is None


def test_gathering_per_step_equals_gathering_ahead(setup):
    """The plain path (each step gathers its minibatch, as for large batches and non-CPU
    backends) computes what the CPU path (all minibatches gathered before the steps) does."""
    config, agent, params, batch = setup
    assert agent.plan.gather_ahead_bytes > 0  # the CPU's plan
    ahead = _learn(config, agent, params, batch, epochs=2, minibatches=4)
    per_step_agent = agent._replace(plan=agent.plan._replace(gather_ahead_bytes=0))
    per_step = _learn(config, per_step_agent, params, batch, epochs=2, minibatches=4)
    for a, b in zip(jax.tree.leaves(ahead), jax.tree.leaves(per_step)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("layout", [{"permutation_per_epoch": True},
                                    {"gather_per_epoch": True},
                                    {"permutation_per_epoch": True, "gather_per_epoch": True}])
@pytest.mark.parametrize("shuffle", ["packed sort", "threefry keys"])
def test_epoch_by_epoch_takes_the_steps_of_all_epochs_at_once(setup, layout, shuffle):
    """PureJaxRL's layout of an update (each epoch draws its permutation at its start, or
    gathers the whole batch in its order and steps over slices of it) takes the steps that
    the plain layout takes, on the same minibatches: the same update, bit for bit, whether the
    permutations are packed sorts (the CPU plan's) or `jax.random.permutation` of a threefry
    key per epoch (the plain plan's; rbg keys are not vmap-invariant in JAX, so with them an
    epoch's permutation drawn alone is another, equally random, than drawn with the rest)."""
    config, agent, params, batch = setup
    plain = agent._replace(plan=agent.plan._replace(gather_ahead_bytes=0))
    if shuffle == "threefry keys":
        config = copy.deepcopy(config)
        config.prng_impl = "threefry2x32"
        plain = agent._replace(plan=PLAIN)
    expected = _learn(config, plain, params, batch, epochs=2, minibatches=4)
    learned = _learn(config, plain._replace(plan=plain.plan._replace(**layout)), params, batch,
                     epochs=2, minibatches=4)
    assert int(learned.opt_steps) == 8
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(learned)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_two_towers_apart_learn_as_the_batched_towers(setup):
    """The plan's `towers_apart` (the two towers as two MLPs, PureJaxRL's layout) trains the
    same parameters as the batched towers, up to the matmuls' order of sums."""
    config, agent, params, batch = setup
    batched = _learn(config, agent, params, batch, epochs=2, minibatches=4)
    apart_agent = agent._replace(plan=agent.plan._replace(towers_apart=True),
                                 network=agent.network.clone(towers_apart=True))
    apart = _learn(config, apart_agent, params, batch, epochs=2, minibatches=4)
    for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(apart)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_the_index_shuffle_permutes_the_whole_batch(setup):
    """Batches beyond the packed sort (here: all, at a limit of 0) shuffle by the Feistel
    network from round keys per epoch: with one minibatch per epoch every step sees the whole
    batch in another order, so the update is the packed path's (up to the order of sums);
    with four, other minibatches train other parameters."""
    config, agent, params, batch = setup
    feistel_agent = agent._replace(plan=agent.plan._replace(packed_sort_bits=0))
    assert feistel_agent.plan.index_shuffle  # the CPU's plan
    learner = make_learner(feistel_agent, [ppo_term(agent.policy, clip_value=True)],
                           batch_size=BATCH, num_epochs=2, num_minibatches=4,
                           prng_impl=config.prng_impl)
    assert learner.shuffle_shape == (2, SHUFFLE_ROUNDS)
    for minibatches, same in ((1, True), (4, False)):
        packed, feistel = (_learn(config, a, params, batch, epochs=2, minibatches=minibatches)
                           for a in (agent, feistel_agent))
        assert int(feistel.opt_steps) == 2 * minibatches
        close = [np.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in
                 zip(jax.tree.leaves(packed.params), jax.tree.leaves(feistel.params))]
        assert all(close) if same else not all(close)


@pytest.mark.parametrize("target_kl", [None, 0.02])
def test_the_flat_carry_steps_as_the_optimizer_on_the_tree(setup, target_kl):
    """The CPU plan's default optimizer carries the params and its state raveled into one
    vector each through the scan; given as a user's optimizer, the same Adam runs on the tree:
    both end at the same params and state (up to the order of the global norm's sums) after
    the same number of steps, the state in optax's tree layout."""
    config, agent, params, batch = setup
    assert agent.plan.flat_optimizer
    flat = _learn(config, agent, params, batch, epochs=2, minibatches=4, target_kl=target_kl)
    tree = _learn(config, agent, params, batch, epochs=2, minibatches=4, target_kl=target_kl,
                  optimizer=lambda hp: make_optimizer(hp.max_grad_norm, hp.lr))
    assert int(flat.opt_steps) == int(tree.opt_steps)
    assert jax.tree.structure(flat.opt_state) == jax.tree.structure(tree.opt_state)
    assert jax.tree.structure(tree.opt_state[1].mu) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves((flat.params, flat.opt_state)),
                    jax.tree.leaves((tree.params, tree.opt_state))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
