"""Where the rollout's time goes on a Brax env: purerl's rollout and its parts against Brax's
own env stepping and policy, at a `peers.py --peer brax` setting, in one process.

    BRAX_PYTHON benchmarks/brax_rollout.py                        # inverted_pendulum
    BRAX_PYTHON benchmarks/brax_rollout.py --setting hopper --repeats 5

Runs under a venv holding `purerl[brax]` (the `peers.py --peer brax` one), with the repository
first on `sys.path`. Each program runs the setting's rollout shape (num_envs x the steps of an
update, `peer_brax.purerl_num_steps`: 2048 x 80 for inverted_pendulum) as one jitted scan with
zero actions where it steps envs without a policy; the programs are compiled, then called
`--repeats` times taking turns (`throughput.timed`), the fastest call counting:

- `purerl rollout`: `purerl.algos.rollout.rollout` with the row's networks (Brax's sizes) at fresh
  params: the policy's and the value tower's passes, the env steps, the values of the last
  step's next observations; the auto-resets drawn ahead of the scan or in each step, as the
  CPU plan has them at this size (`purerl.plan`'s `resets_ahead`: inverted_pendulum's 163,840
  in each step, hopper's 40,960 ahead).
- `purerl env step, resets in the step`: the agent's wrapped, auto-resetting step (episode
  statistics, time limit), each env's step splitting its reset's key from its step key and
  computing the reset (gymnax's step).
- `purerl env step, resets given`: the same with each step's resets computed by the caller from
  keys split before the scan, outside the env's step.
- `purerl adapter step`: the adapter's `step_env` alone (no auto-reset, no statistics).
- `Brax raw step`: the raw env's `step`, vmapped.
- `Brax training step`: the env in Brax's training wrappers (`envs.training.wrap`: episode,
  auto-reset restoring the first state, vmap), as Brax's PPO steps it.
- `purerl networks`: the policy and value passes of the row's networks over `[B]`
  observations, once per step.
- `Brax policy`: Brax's PPO inference (`make_inference_fn`: observation normalization, the
  4 x 32 policy MLP, a tanh-squashed Gaussian sample), once per step.

Prints us per env step and writes `results/brax_rollout_<setting>.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))  # the checkout's purerl, whatever the venv holds

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import peer_brax  # noqa: E402  (this file's folder is first on sys.path)
from harness import REPO, git_state, machine, package_versions  # noqa: E402
from other_peers import PEERS  # noqa: E402
from throughput import timed  # noqa: E402

from purerl.algos.rollout import RolloutNoise, draws_resets_ahead, rollout  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.envs.normalization import init_normalizer  # noqa: E402
from purerl.envs.suites.brax import quiet_brax  # noqa: E402
from purerl.nets.agent import make_agent  # noqa: E402


def scanned(step, carry, num_steps: int, inputs=None):
    """`step(carry, input) -> (carry, output)` scanned over `num_steps` steps (and `inputs`,
    `[num_steps, ...]`) -> the outputs' sum (so that nothing the step computes is dead code)."""
    def body(carry, step_input):
        carry, output = step(carry, step_input)
        return carry, sum(jnp.sum(leaf) for leaf in jax.tree.leaves(output))

    return jax.lax.scan(body, carry, inputs, length=num_steps)[1].sum()


def of_raw_key(f):
    """`f` of a typed key as a function of Brax's raw uint32 key (the programs take one key)."""
    return lambda raw: f(jax.random.wrap_key_data(raw))


def purerl_programs(setting: dict, num_envs: int, num_steps: int) -> dict:
    """purerl's programs, each a function of a raw key."""
    config = peer_brax.purerl_config({"setting": setting["name"]}, num_envs * num_steps)
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params,
                       peer_brax.brax_sized_network(setting))
    params = agent.network.init(jax.random.key(0), *agent.example_inputs())
    obs, state = agent.reset_envs(jax.random.split(jax.random.key(1), num_envs), env_params)
    inner = state.env_state  # the adapter's own state, under the episode statistics
    stats = init_normalizer(agent.obs_shape, num_envs).obs
    action = jnp.zeros((num_envs, *env.action_space(env_params).shape))
    step_env = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))
    resets_ahead = draws_resets_ahead(agent, num_steps, num_envs)

    def full_rollout(key):  # the auto-resets drawn ahead where the CPU plan draws them
        noise_key, env_key, reset_key = jax.random.split(key, 3)
        noise = RolloutNoise(agent.policy.noise_from_bits(jax.random.bits(
            noise_key, agent.policy.noise_shape((num_steps, num_envs)))), env_key,
            jax.random.split(reset_key, (num_steps, num_envs)) if resets_ahead else None)
        done = rollout(agent, params, state, obs, stats, env_params, noise)
        return done.transition.obs.sum() + done.transition.next_value.sum()

    # each step's env keys `[T, B]`, split ahead as the rollout splits them
    step_keys = lambda key: jax.random.split(key, (num_steps, num_envs))  # noqa: E731

    def wrapped(key, given_resets):
        def step(state, keys):
            resets = agent.draw_resets(keys, env_params) if given_resets else None
            next_obs, state, *_, info = agent.step_envs(keys, state, action, env_params, resets)
            return state, (next_obs, info["final_observation"], info["episode_return"])
        return scanned(step, state, num_steps, step_keys(key))

    def adapter(key):
        def step(inner, keys):
            next_obs, inner, reward, *_ = step_env(keys, inner, action, env_params)
            return inner, (next_obs, reward)
        return scanned(step, inner, num_steps, step_keys(key))

    def networks(key):
        def step(carry, obs):
            outputs = agent.network.apply(params, agent.observe(stats, obs))
            return carry, outputs[:2]
        return scanned(step, 0, num_steps,
                       jax.random.normal(key, (num_steps, num_envs, *agent.obs_shape)))

    programs = {"purerl rollout": full_rollout,
                "purerl env step, resets in the step": lambda key: wrapped(key, False),
                "purerl env step, resets given": lambda key: wrapped(key, True),
                "purerl adapter step": adapter,
                "purerl networks": networks}
    return {name: of_raw_key(f) for name, f in programs.items()}


def brax_programs(setting: dict, num_envs: int, num_steps: int) -> dict:
    """Brax's programs, each a function of a raw key."""
    from brax import envs
    from brax.training.acme import running_statistics, specs
    from brax.training.agents.ppo import networks as ppo_networks

    with quiet_brax():
        env = envs.get_environment(setting["env"], backend=setting["backend"])
    trained = envs.training.wrap(env, episode_length=setting["episode_length"],
                                 action_repeat=setting["action_repeat"])
    keys = jax.random.split(jax.random.PRNGKey(1), num_envs)
    raw_state, wrapped_state = jax.vmap(env.reset)(keys), trained.reset(keys)
    action = jnp.zeros((num_envs, env.action_size))
    raw_step = jax.vmap(env.step)
    networks = ppo_networks.make_ppo_networks(
        env.observation_size, env.action_size,
        preprocess_observations_fn=running_statistics.normalize,
        **{k: v for k, v in peer_brax.BRAX_NETWORKS.items() if k != "activation"},
        activation=getattr(jax.nn, peer_brax.BRAX_NETWORKS["activation"]))
    normalizer = running_statistics.init_state(specs.Array((env.observation_size,), jnp.float32))
    policy_params = networks.policy_network.init(jax.random.PRNGKey(0))
    policy = ppo_networks.make_inference_fn(networks)((normalizer, policy_params))

    def stepped(step, state):
        return scanned(lambda state, _: (lambda new: (new, (new.obs, new.reward)))(step(state)),
                       state, num_steps)

    def inference(key):
        def step(carry, inputs):
            obs, sample_key = inputs
            return carry, policy(obs, sample_key)
        return scanned(step, 0, num_steps,
                       (jax.random.normal(key, (num_steps, num_envs, env.observation_size)),
                        jax.random.split(key, num_steps)))

    return {"Brax raw step": lambda key: stepped(lambda s: raw_step(s, action), raw_state),
            "Brax training step": lambda key: stepped(lambda s: trained.step(s, action),
                                                      wrapped_state),
            "Brax policy": inference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=sorted(peer_brax.BRAX_SETTINGS),
                        default="inverted_pendulum")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    setting = {**peer_brax.settings_of({"setting": args.setting}), "name": args.setting}
    num_envs, num_steps = setting["num_envs"], peer_brax.purerl_num_steps(setting)
    functions = {**purerl_programs(setting, num_envs, num_steps),
                 **brax_programs(setting, num_envs, num_steps)}
    programs = {name: jax.jit(f).lower(jax.random.PRNGKey(0)).compile()
                for name, f in functions.items()}
    best = timed(programs, jax.random.PRNGKey(2), args.repeats)[0]
    us = {name: round(1e6 * seconds / (num_envs * num_steps), 3) for name, seconds in best.items()}
    for name, value in us.items():
        print(f"{name:32s} {value:8.2f} us/step")
    out = BENCHMARKS / "results" / f"brax_rollout_{args.setting}.json"
    out.write_text(json.dumps({
        "setting": args.setting, "num_envs": num_envs, "num_steps": num_steps,
        "repeats": args.repeats, "us_per_env_step": us,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "purerl": git_state(REPO),
        "versions": package_versions(sys.executable, PEERS["brax"].packages)},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
