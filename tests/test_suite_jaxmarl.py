"""The JaxMARL adapter (purerl/envs/suites/jaxmarl.py) and the agents' lanes
(purerl/nets/multi_agent.py): spaces, masks, padding, truncation at the step limit, an agent
done before its episode, resets drawn by purerl, lanes that line up with each agent's rewards,
agent ids that let one shared policy learn two roles, resume, the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("jaxmarl")

from conftest import resume_from_checkpoint, run_cli, run_cli_ok, tiny_config  # noqa: E402
from jaxmarl.environments import spaces as marl_spaces  # noqa: E402
from jaxmarl.environments.multi_agent_env import MultiAgentEnv  # noqa: E402

from purerl.config import ConfigError, EnvConfig, MarlConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.nets.agent import make_agent  # noqa: E402


class RoleProbe(MultiAgentEnv):
    """Two agents who see the same observation; agent `i` is paid 1 for action `i`. Episodes
    end only at the step limit (5 steps). A policy shared without agent ids gets a team return
    of 1 per step whatever it does; with ids it can get 2."""

    def __init__(self, max_steps: int = 5):
        super().__init__(num_agents=2)
        self.max_steps = max_steps
        self.observation_spaces = {a: marl_spaces.Box(0.0, 1.0, (3,)) for a in self.agents}
        self.action_spaces = {a: marl_spaces.Discrete(2) for a in self.agents}

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def _obs(self, step):
        return {a: jnp.full((3,), step / self.max_steps, jnp.float32) for a in self.agents}

    def reset(self, key):
        return self._obs(0), jnp.int32(0)

    def step_env(self, key, state, actions):
        step = state + 1
        rewards = {a: (actions[a] == i).astype(jnp.float32) for i, a in enumerate(self.agents)}
        done = step >= self.max_steps
        return self._obs(step), step, rewards, {a: done for a in self.agents} | {
            "__all__": done}, {}


class DyingProbe(RoleProbe):
    """RoleProbe whose agent_1 is done from step 2 on, and whose episode ends at step 4 in a
    terminal state (its step limit is 10)."""

    def __init__(self):
        super().__init__(max_steps=10)

    def step_env(self, key, state, actions):
        obs, step, rewards, _, info = super().step_env(key, state, actions)
        end = step >= 4
        dones = {"agent_0": end, "agent_1": step >= 2, "__all__": end}
        return obs, step, rewards, dones, info


class StateProbe(RoleProbe):
    """RoleProbe with a global state, JaxMARL's `world_state` key: `[v, step]`, `v` drawn per
    env at its reset; agent `i` is paid `v * (i + 1)` whatever it does."""

    def reset(self, key):
        obs, _ = super().reset(key)
        value = jax.random.uniform(key)
        return {**obs, "world_state": jnp.stack([value, 0.0])}, (jnp.int32(0), value)

    def step_env(self, key, state, actions):
        step, value = state
        obs, step, _, dones, info = super().step_env(key, step, actions)
        rewards = {a: value * (i + 1) for i, a in enumerate(self.agents)}
        obs = {**obs, "world_state": jnp.stack([value, step.astype(jnp.float32)])}
        return obs, (step, value), rewards, dones, info


class ShapedProbe(RoleProbe):
    """RoleProbe whose step also reports JaxMARL's `shaped_reward` (Overcooked's key): 0.5
    for agent_0 and 0.25 for agent_1 at every step."""

    def step_env(self, key, state, actions):
        obs, step, rewards, dones, _ = super().step_env(key, state, actions)
        return obs, step, rewards, dones, {"shaped_reward": {"agent_0": 0.5, "agent_1": 0.25}}


class NaNProbe(RoleProbe):
    """RoleProbe whose agent_1 is paid NaN with probability 0.005 per step: the NaN guard's."""

    def step_env(self, key, state, actions):
        obs, step, rewards, dones, info = super().step_env(key, state, actions)
        bad = jax.random.uniform(key) < 0.005
        return obs, step, rewards | {"agent_1": jnp.where(bad, jnp.nan, 1.0)}, dones, info


@pytest.fixture(scope="module")
def spread():
    return make_env(EnvConfig(name="jaxmarl/MPE_simple_spread_v3"))


def lanes_agent(env_name, num_envs=2, agent_id=False, network=None, share_params=True):
    config = EnvConfig(name=env_name, num_envs=num_envs)
    env, params = make_env(config)
    return make_agent(config, network or tiny_config().network, env, params,
                      marl=MarlConfig(agent_id=agent_id, share_params=share_params)), env, params


def test_spaces_and_agent_axis(spread):
    env, params = spread
    assert env.name == "jaxmarl/MPE_simple_spread_v3"
    assert env.agent_names == ("agent_0", "agent_1", "agent_2")
    assert params.max_steps_in_episode == 25  # MPE's max_steps
    assert env.action_space(params).n == 5 and env.action_mask_size == 0
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (3, 18) and obs.dtype == jnp.float32
    obs, state, reward, terminated, truncated, info = env.step(
        jax.random.key(1), state, jnp.array([0, 1, 2]), params)
    assert reward.shape == (3,) and terminated.shape == () and truncated.shape == ()


def test_mpe_time_limit_is_truncation_and_purerl_resets(spread):
    env, params = spread
    obs, state = env.reset(jax.random.key(0), params)
    step = jax.jit(env.step)
    ends = []
    for t in range(25):
        obs, state, _, terminated, truncated, info = step(
            jax.random.key(t), state, jnp.zeros(3, jnp.int32), params)
        ends.append((bool(terminated), bool(truncated)))
    assert ends[:24] == [(False, False)] * 24 and ends[24] == (False, True)
    # the pre-reset observation is kept, and the env restarted from a fresh reset
    assert not np.array_equal(info["final_observation"], obs)
    assert int(state.time) == 0
    shorter = params.replace(max_steps_in_episode=10)  # purerl's limit, before MPE's
    _, state = env.reset(jax.random.key(0), shorter)
    for t in range(10):
        _, state, _, terminated, truncated, _ = step(
            jax.random.key(t), state, jnp.zeros(3, jnp.int32), shorter)
        assert (bool(terminated), bool(truncated)) == (False, t == 9)


def test_probe_whose_only_ending_is_the_limit_truncates():
    env, params = make_env(EnvConfig(name="test_suite_jaxmarl:RoleProbe"))
    assert env.name == "jaxmarl/RoleProbe" and params.max_steps_in_episode == 5
    _, state = env.reset(jax.random.key(0), params)
    flags = []
    for t in range(5):
        _, state, reward, terminated, truncated, _ = env.step(
            jax.random.key(t), state, jnp.array([0, 1]), params)
        flags.append((bool(terminated), bool(truncated)))
        assert np.array_equal(reward, [1.0, 1.0])
    assert flags == [(False, False)] * 4 + [(False, True)]


def test_lanes_line_up_with_each_agents_rewards_and_ends():
    agent, env, params = lanes_agent("test_suite_jaxmarl:DyingProbe", num_envs=3)
    assert agent.num_agents == 2 and agent.obs_shape == (3,)
    keys = jax.random.split(jax.random.key(0), 3)
    obs, state = agent.reset_envs(keys, params)
    assert obs.shape == (6, 3)
    # env b's agent a is lane b * 2 + a: agent_0 plays 0 (paid), agent_1 plays b % 2
    actions = jnp.array([0, 0, 0, 1, 0, 0])
    lane_flags = []
    for _ in range(4):
        obs, state, reward, terminated, truncated, info = agent.step_envs(
            keys, state, actions, params, None)
        np.testing.assert_array_equal(reward, [1, 0, 1, 1, 1, 0])
        lane_flags.append((np.asarray(terminated).tolist(), np.asarray(truncated).tolist()))
    no = [False] * 6
    # agent_1 is done from step 2 (its own ending), which ends nothing: its lane goes on,
    # paid, until the episode ends at step 4 (terminal) for every lane
    assert lane_flags == [(no, no)] * 3 + [([True] * 6, no)]
    np.testing.assert_array_equal(info["episode_done"], [True] * 3)
    # the team's return sums its agents': 4 steps of agent_0's 1, and agent_1's
    np.testing.assert_allclose(info["episode_return"], [4, 8, 4])
    np.testing.assert_allclose(info["outcomes"]["return/agent_1"], [0, 4, 0])


def test_a_shaped_reward_is_weighted_by_the_params_and_left_out_of_returns():
    from purerl.envs.shaping import shaping_schedule

    agent, env, params = lanes_agent("test_suite_jaxmarl:ShapedProbe", num_envs=1)
    assert params.shaped_reward_weight == 0.0  # unshaped unless the trainer anneals it
    keys = jax.random.split(jax.random.key(0), 1)
    _, state = agent.reset_envs(keys, params)
    weighted = params.replace(shaped_reward_weight=0.5)
    for _ in range(5):  # both agents paid 1 by their own actions, plus half the shaping
        _, state, reward, _, truncated, info = agent.step_envs(
            keys, state, jnp.array([0, 1]), weighted, None)
        np.testing.assert_allclose(reward, [1.25, 1.125])
    assert bool(truncated.all())
    np.testing.assert_allclose(info["episode_return"], [10.0])  # the env's own rewards
    np.testing.assert_allclose(info["outcomes"]["return/agent_1"], [5.0])

    config = EnvConfig(name=env.name, reward_shaping_horizon=10)
    params_at = shaping_schedule(config, params, steps_per_update=4)
    weights = [float(params_at(jnp.int32(update)).shaped_reward_weight) for update in range(4)]
    np.testing.assert_allclose(weights, [1.0, 0.6, 0.2, 0.0], rtol=1e-6)
    assert shaping_schedule(EnvConfig(name=env.name), params, 4)(jnp.int32(1)) is params
    cartpole = EnvConfig(name="CartPole-v1", reward_shaping_horizon=10)
    with pytest.raises(ConfigError, match="reward_shaping_horizon=10: .* has no shaped reward"):
        shaping_schedule(cartpole, make_env(cartpole)[1], 4)


def test_agent_ids_are_appended_before_the_mask():
    agent, _, params = lanes_agent("test_suite_jaxmarl:RoleProbe", agent_id=True)
    obs, _ = agent.reset_envs(jax.random.split(jax.random.key(0), 2), params)
    assert agent.obs_shape == (5,)
    np.testing.assert_array_equal(obs[:, 3:], np.tile(np.eye(2), (2, 1)))
    masked, _, params = lanes_agent("jaxmarl/MPE_simple_speaker_listener_v4", agent_id=True)
    obs, _ = masked.reset_envs(jax.random.split(jax.random.key(0), 2), params)
    assert masked.obs_shape == (11 + 2 + 5,)
    np.testing.assert_array_equal(obs[:2, 11:13], np.eye(2))  # the ids, then the mask
    np.testing.assert_array_equal(obs[0, -5:], [1, 1, 1, 0, 0])


def test_smax_masks_and_won():
    config = EnvConfig(name="jaxmarl/HeuristicEnemySMAX", params={"map": "2s3z"})
    env, params = make_env(config)
    assert len(env.agent_names) == 5 and env.action_mask_size == 10
    assert env.info_outcomes == ("won",) and params.max_steps_in_episode == 100
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (5, 127 + 10)
    mask = np.asarray(obs[:, -10:])
    assert set(np.unique(mask)) <= {0.0, 1.0} and mask.sum(axis=1).min() >= 1
    *_, info = env.step(jax.random.key(1), state, jnp.zeros(5, jnp.int32), params)
    assert info["won"].shape == ()


def test_padding_and_mask_for_agents_of_different_sizes():
    env, params = make_env(EnvConfig(name="jaxmarl/MPE_simple_speaker_listener_v4"))
    assert env.agent_names == ("speaker_0", "listener_0")
    # the speaker's 3 actions padded to the listener's 5, the padding illegal
    assert env.action_space(params).n == 5 and env.action_mask_size == 5
    obs, _ = env.reset(jax.random.key(0), params)
    assert obs.shape == (2, 11 + 5)
    np.testing.assert_array_equal(obs[0, 3:11], 0.0)  # the speaker's 3 entries, padded
    np.testing.assert_array_equal(obs[:, -5:], [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


def test_overcooked_images_and_named_layout():
    env, params = make_env(EnvConfig(name="jaxmarl/overcooked",
                                     params={"layout": "cramped_room"}))
    obs, _ = env.reset(jax.random.key(0), params)
    assert obs.shape == (2, 4, 5, 26) and obs.dtype == jnp.float32
    assert params.max_steps_in_episode == 400


@pytest.mark.parametrize("name, params, message", [
    ("jaxmarl/MPE_simple_sprade_v3", {}, "did you mean jaxmarl/MPE_simple_spread_v3"),
    ("jaxmarl/overcooked", {"layout": "kitchen"}, "env.params.layout='kitchen' is not one"),
    ("jaxmarl/overcooked", {"speed": 2}, "could not be made with speed=2: TypeError"),
])
def test_errors_are_one_line(name, params, message):
    with pytest.raises(ConfigError, match=message):
        make_env(EnvConfig(name=name, params=params))


def test_recurrent_lanes_restart_at_the_episodes_end_and_replay_exactly():
    """A GRU on DyingProbe: every lane's memory restarts after the episode's end at step 4,
    agent_1's too, though it was done from step 2. The second rollout (steps 4, 1, 2) holds
    that end; the learner's one minibatch replays every lane from the rollout's first carry,
    restarting on the pre-step done, so its ratio is exactly 1 (approx KL 0.0: restarting on
    the post-step done, the step-4 outputs would differ)."""
    from purerl.parallel.program import make_train

    config = tiny_config(**{"env.name": "test_suite_jaxmarl:DyingProbe", "env.num_envs": 2,
                            "ppo.num_steps": 3, "ppo.num_epochs": 1, "ppo.num_minibatches": 1,
                            "network.rnn": "gru", "network.rnn_size": 8, "total_timesteps": 12})
    state, metrics = jax.jit(make_train(config))(jax.random.key(0))
    # 2 updates: steps 1-3, then 4 (the episode's end), 1 and 2 of the next: no lane ends
    # before step 3, agent_1's (odd lanes, done from step 2) neither
    np.testing.assert_array_equal(state.memory.first[0], [False] * 4)
    np.testing.assert_array_equal(np.asarray(metrics.episode_count), [[0, 2]])
    np.testing.assert_array_equal(np.asarray(metrics.scalars["loss/approx_kl"]), 0.0)


@pytest.mark.parametrize("rnn", [None, "gru"])
def test_separate_params_act_and_learn_per_group(rnn):
    """marl.share_params=false on RoleProbe (no agent_classes: each agent its own group): a
    lane's outputs are its group's network's on the observation without the group one-hot,
    and a loss on agent_0's lanes alone gives agent_1's parameters no gradient."""
    from purerl.nets.layers import init_params

    network = tiny_config(**{"network.rnn": rnn, "network.rnn_size": 8}).network
    agent, env, params = lanes_agent("test_suite_jaxmarl:RoleProbe", num_envs=3,
                                     network=network, share_params=False)
    assert env.agent_groups == (0, 1) and agent.lane_layout.num_groups == 2
    obs, _ = agent.reset_envs(jax.random.split(jax.random.key(0), 3), params)
    np.testing.assert_array_equal(obs[:, :2], np.tile(np.eye(2), (3, 1)))  # group one-hots
    obs = obs.at[:, 2:].set(jax.random.uniform(jax.random.key(2), (6, 3)))
    variables = init_params(agent.network, jax.random.key(1), *agent.example_inputs())
    group_params = variables["params"]
    assert set(group_params) == {"groups_0", "groups_1"}
    one_group = agent.network.network  # what each group runs, reading obs[:, 2:]
    first = jnp.ones((6,), bool)
    carry = agent.initial_memory(6).carry if rnn else None

    def outputs(variables, network, obs):
        return (network.apply(variables, carry, obs, first) if rnn
                else network.apply(variables, obs))

    grouped = outputs(variables, agent.network, obs)
    for g in (0, 1):
        own = outputs({"params": group_params[f"groups_{g}"]}, one_group, obs[:, 2:])
        for got, want in zip(jax.tree.leaves(grouped), jax.tree.leaves(own)):
            np.testing.assert_array_equal(got[g::2], want[g::2])
    assert not np.allclose(*(np.asarray(outputs({"params": group_params[f"groups_{g}"]},
                                                one_group, obs[:, 2:])[-1]) for g in (0, 1)))

    def agent_0_loss(variables):
        return jnp.sum(outputs(variables, agent.network, obs)[-1][0::2] ** 2)

    grads = jax.grad(agent_0_loss)(variables)["params"]
    assert any(np.any(leaf != 0) for leaf in jax.tree.leaves(grads["groups_0"]))
    assert all(np.all(leaf == 0) for leaf in jax.tree.leaves(grads["groups_1"]))


def test_agent_groups_come_from_agent_classes(spread, caplog):
    tag, _ = make_env(EnvConfig(name="jaxmarl/MPE_simple_tag_v3"))
    assert tag.agent_names[-1] == "agent_0" and tag.agent_groups == (0, 0, 0, 1)
    env, params = spread  # one class: nothing to separate
    assert env.agent_groups == (0, 0, 0)
    agent = make_agent(EnvConfig(name=env.name), tiny_config().network, env, params,
                       marl=MarlConfig(share_params=False))
    assert agent.lane_layout.groups == () and "share one set of parameters" in caplog.text
    with pytest.raises(ConfigError, match="marl.share_params=false: .* is for multi-agent envs"):
        make_agent(EnvConfig(name="CartPole-v1"), tiny_config().network,
                   *make_env(EnvConfig(name="CartPole-v1")), marl=MarlConfig(share_params=False))


def test_the_central_critics_input_lines_up_with_each_agents_rewards_and_ends():
    """marl.critic=central: every lane's observation starts with its own env's global state and
    the agent's id (env-major lanes: lane b * A + a is env b's agent a), which is what the
    value tower reads, and the lane's reward and ends are that agent's of that env. Lanes laid
    out agent-major against rewards env-major (JaxMARL #85) would pair another env's state
    with the reward."""
    config = EnvConfig(name="test_suite_jaxmarl:StateProbe", num_envs=3)
    env, params = make_env(config)
    marl = MarlConfig(agent_id=True, critic="central")
    agent = make_agent(config, tiny_config().network, env, params, marl=marl)
    assert agent.global_state_size == 2 and agent.obs_shape == (2 + 2 + 3 + 2,)
    keys = jax.random.split(jax.random.key(0), 3)
    obs, state = agent.reset_envs(keys, params)
    for t in range(1, 6):
        obs_before = obs
        obs, state, reward, terminated, truncated, info = agent.step_envs(
            keys, state, jnp.zeros(6, jnp.int32), params, None)
        lanes = np.asarray(obs_before)
        values = lanes[:, 0]  # each lane's env's v
        np.testing.assert_array_equal(values[0::2], values[1::2])  # one env, one state
        assert len(set(values[0::2].tolist())) == 3  # three envs, three states
        np.testing.assert_array_equal(lanes[:, 1], t - 1)
        np.testing.assert_array_equal(lanes[:, 2:4], np.tile(np.eye(2), (3, 1)))
        np.testing.assert_allclose(reward, values * np.tile([1, 2], 3), rtol=1e-6)
        np.testing.assert_array_equal(truncated, [t == 5] * 6)
        np.testing.assert_array_equal(info["final_observation"][:, 0], values)
    # the value tower reads the state and id, the policy tower the rest
    net = agent.network
    variables = net.init(jax.random.key(1), obs)
    changed_state = obs.at[:, :4].add(1.0)
    changed_own = obs.at[:, 4:].add(1.0)
    value, policy = (lambda o: net.apply(variables, o, method="value"),
                     lambda o: net.apply(variables, o, method="policy"))
    np.testing.assert_array_equal(value(changed_own), value(obs))
    np.testing.assert_array_equal(policy(changed_state), policy(obs))
    assert not np.array_equal(value(changed_state), value(obs))


def test_central_critic_settings_are_checked():
    from purerl.config import Config, NetworkConfig
    from purerl.validation import validate

    spread = EnvConfig(name="jaxmarl/MPE_simple_spread_v3")
    with pytest.raises(ConfigError, match="marl.critic='global' is not one of local, central"):
        validate(Config(env=spread, marl=MarlConfig(critic="global")))
    with pytest.raises(ConfigError, match="marl.critic=central .* needs two MLP towers"):
        validate(Config(env=spread, marl=MarlConfig(critic="central"),
                        network=NetworkConfig(shared=True)))
    with pytest.raises(ConfigError, match="marl.critic=central: .* is for multi-agent envs"):
        make_agent(EnvConfig(name="CartPole-v1"), tiny_config().network,
                   *make_env(EnvConfig(name="CartPole-v1")), marl=MarlConfig(critic="central"))
    overcooked = EnvConfig(name="jaxmarl/overcooked", params={"layout": "cramped_room"})
    with pytest.raises(ConfigError, match="observes images"):
        make_agent(overcooked, tiny_config().network, *make_env(overcooked),
                   marl=MarlConfig(critic="central"))


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_nan_guard_stops_a_multi_agent_run_and_keeps_the_good_part(tmp_path):
    """One agent's NaN reward (NaNProbe, first in update 8 of seed 0's 20) stops the run after
    that update's chunk: the rows before it are finite, and the checkpoint of update 6 is the
    last, its parameters finite."""
    import purerl
    from purerl.storage.restoring import restore_run

    config = tiny_config(**{"env.name": "test_suite_jaxmarl:NaNProbe", "env.num_envs": 2,
                            "ppo.num_steps": 8, "total_timesteps": 320, "log.tensorboard": False,
                            "checkpoint.every": 2, "eval.every": 0})
    summary = purerl.run(config, tmp_path, console=False)
    assert summary["status"] == "nonfinite"
    bad_update = int(summary["error"].split("at update ")[1].split(":")[0])
    assert "non-finite loss" in summary["error"] and 2 < bad_update < 20
    assert f"checkpoints/{(bad_update - 1) // 2 * 2} is the last good" in summary["error"]
    rows = _rows(tmp_path)
    assert [r["update"] for r in rows] == list(range(1, bad_update))
    assert all(np.isfinite(r["value_loss"]) and np.isfinite(r["return/agent_1"])
               for r in rows if r["return/agent_1"] is not None)
    saved = restore_run(tmp_path, "final")
    assert saved.update == (bad_update - 1) // 2 * 2
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(saved.state.params))


ROLE = ["+env=gymnax", "env.name=test_suite_jaxmarl:RoleProbe", "env.num_envs=16",
        "ppo.num_steps=10", "ppo.lr=0.01", "ppo.anneal_lr=false", "total_timesteps=8000",
        "log.progress=false", "eval.every=0"]


@pytest.mark.parametrize("agent_id,share_params", [(True, True), (False, True),
                                                    (False, False)])
def test_roles_are_learned_with_agent_ids_or_separate_params(tmp_path, agent_id, share_params):
    run_cli_ok(*ROLE, f"marl.agent_id={str(agent_id).lower()}",
               f"marl.share_params={str(share_params).lower()}", f"hydra.run.dir={tmp_path}")
    rows = _rows(tmp_path)
    final = np.mean([row["episode_return"] for row in rows[-5:]])
    # 5 steps of 2 agents: 10 at best; a policy that cannot tell the agents apart gets 5
    learns = agent_id or not share_params
    if learns:
        assert final > 9.0
    else:
        assert 4.0 < final < 6.0
    assert set(rows[-1]) >= {"return/agent_0", "return/agent_1"}
    assert (tmp_path / "outcomes.png").stat().st_size > 0  # each agent's return drawn
    if learns:  # the trained policy acts per agent by name, and exports one agent's lane
        import purerl
        from purerl.storage.exporting import policy_signature

        policy = purerl.load(tmp_path)
        obs, _ = policy.env.reset(jax.random.key(0), policy.env_params)
        actions, _ = policy.act({"agent_1": obs[1], "agent_0": obs[0]})
        assert {name: int(a) for name, a in actions.items()} == {"agent_0": 0, "agent_1": 1}
        # 3 entries and 2 ids, or the group's one-hot (2) and 3 entries
        assert policy_signature(policy).inputs[0].shape == ("B", 5)


def test_a_seeds_envs_split_over_devices_keep_their_agents_together(tmp_path):
    """A seed's 16 envs split over 2 forced CPU devices (8 envs, 16 lanes each): the agents of
    an env stay on its device, so the seed learns the roles as on one device."""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    result = run_cli(*ROLE, "marl.agent_id=true", f"hydra.run.dir={tmp_path}", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "summary.json").read_text())["devices"] == 2
    assert np.mean([row["episode_return"] for row in _rows(tmp_path)[-5:]]) > 9.0


def test_the_mpe_preset_runs_from_the_command_line(tmp_path):
    run_cli_ok("+env=mpe-simple-spread", "env.num_envs=4", "ppo.num_steps=8",
               "total_timesteps=64", "log.progress=false", f"hydra.run.dir={tmp_path}")
    assert len(_rows(tmp_path)) == 2


def test_the_overcooked_preset_anneals_its_shaping_from_the_command_line(tmp_path):
    run_cli_ok("+env=overcooked-cramped-room", "env.num_envs=2", "ppo.num_steps=16",
               "ppo.num_minibatches=2", "total_timesteps=96", "env.reward_shaping_horizon=64",
               "log.progress=false", "eval.every=0", f"hydra.run.dir={tmp_path}")
    weights = [row["reward_shaping_weight"] for row in _rows(tmp_path)]
    np.testing.assert_allclose(weights, [1.0, 0.5, 0.0])  # 32 env steps an update


def test_the_smax_preset_logs_won_and_resumes_bit_exact(tmp_path):
    """`+env=smax-2s3z` (MAPPO: a central critic, GRUs, agent ids, masks) at a tiny budget."""
    args = ["+env=smax-2s3z", "env.num_envs=4", "ppo.num_steps=32", "total_timesteps=512",
            "network.rnn_size=16", "checkpoint.every=2", "log.progress=false",
            "eval.num_episodes=2"]
    run_cli_ok(*args, f"hydra.run.dir={tmp_path / 'run'}")
    rows = _rows(tmp_path / "run")
    assert len(rows) == 4 and all("won" in row for row in rows)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(summary["final_outcomes"]) == {f"return/ally_{i}" for i in range(5)} | {"won"}
    assert 0 <= summary["final_outcomes"]["won"] <= 1
    resume_from_checkpoint(tmp_path / "run", tmp_path / "resumed", 2, *args)
    assert _rows(tmp_path / "resumed") == rows
