"""One learner step and one update of purerl and a peer, timed directly at a peer row's
setting: where the time of a row goes, without fitting whole runs.

    python benchmarks/peer_steps.py --peer-python ../rejax-venv/bin/python
    python benchmarks/peer_steps.py --peer-python ../rejax-venv/bin/python --setting breakout
    python benchmarks/peer_steps.py --peer brax --peer-python ../brax-venv/bin/python \
        --setting hopper

Each side runs in a process of its own (the peer's under its venv's Python; purerl's as
`peers.py` runs it against that peer), the sides taking turns (purerl, the peer, ...) `--turns`
times; each measurement is the fastest of `--repeats` calls of a jitted program, compile
excluded:

- `step_us`: one minibatch step of the learner (forward and backward over the minibatch, the
  optimizer's update), from the row's epochs x minibatches over a batch of the row's shapes
  (random values, given to the program as an argument), shuffles included. purerl: its
  learner (`make_learner`) as the row's config and this CPU's plan make it; rejax: its PPO's
  `shuffle_and_split` and `update` (actor and critic steps) per epoch, as its
  `train_iteration` runs them; Brax: its `compute_ppo_loss` on its `make_ppo_networks`,
  `optax.adam`, a permutation per epoch and a scan of minibatches, as its `ppo.train` runs
  them.
- `step_sgd_us` (purerl): the same with plain SGD for the optimizer: what global-norm
  clipping and Adam add to a step.
- `update_us` (purerl and rejax): one whole update (rollout, GAE, all epochs of minibatch
  steps) at two epochs and at the row's; their difference over the epochs between is one
  epoch's cost (`epoch_us`), and the rest of an update (`rollout_us`) is the update at two
  epochs less two of those (not one epoch: rejax's update at one epoch cost more than the
  line through the others gives, 1,639 us against some 1,370 at CartPole in one timing).
  Brax's `ppo.train` does not expose its update.

Writes `results/peer_steps_<peer>_<setting>.json` (medians over the turns, and each turn's
values) and prints both sides' medians and purerl / peer ratios.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import time
from datetime import datetime, timezone

from harness import BENCHMARKS, REPO, git_state, machine, package_versions
from other_peers import PEERS, side_env, side_python

SETTINGS = {"rejax": ("cartpole", "breakout"), "brax": ("hopper", "inverted_pendulum")}
# samples a timed call covers at least, in learns or updates scanned inside it
SAMPLES_PER_CALL = 20_000


def update_epochs(row_epochs: int) -> tuple:
    """The epochs an update is timed at: two and the row's."""
    return (2, row_epochs)


def best_s(program, args: tuple, repeats: int) -> float:
    """The fastest of `repeats` calls of the jitted `program(*args)`, after one that compiles."""
    import jax

    jax.block_until_ready(program(*args))
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(program(*args))
        best = min(best, time.perf_counter() - start)
    return best


def scanned(step, count: int):
    """`state -> state` after `count` applications of `step(state, *args)`, jitted."""
    import jax

    def program(state, *args):
        return jax.lax.scan(lambda s, _: (step(s, *args), None), state, None, count)[0]

    return jax.jit(program)


def random_batch(shapes: dict, num_actions: int, key):
    """Random arrays of `shapes` (name: shape): obs and values standard normal, actions
    integers below `num_actions` (or normal when 0), log-probs near the uniform policy's."""
    import jax

    keys = dict(zip(shapes, jax.random.split(key, len(shapes))))
    batch = {}
    for name, shape in shapes.items():
        if name == "action" and num_actions:
            batch[name] = jax.random.randint(keys[name], shape, 0, num_actions)
        elif name == "log_prob":
            batch[name] = -math.log(max(num_actions, 2)) + 0.01 * jax.random.normal(keys[name],
                                                                                    shape)
        else:
            batch[name] = jax.random.normal(keys[name], shape)
    return batch


def purerl_side(peer: str, setting: str, repeats: int) -> dict:
    """purerl's step (with its optimizer and with SGD) and, against rejax, its update."""
    import jax
    import optax

    from purerl.algos.learner import make_learner
    from purerl.algos.ppo import make_ppo
    from purerl.core.losses import Batch, ppo_term
    from purerl.core.schedules import hyperparams_from_config
    from purerl.envs import make_env
    from purerl.nets.agent import make_agent

    if peer == "rejax":
        import peer_rejax

        config, network = peer_rejax.purerl_config({"setting": setting, "num_seeds": 1},
                                                   100_000), None
    else:
        import peer_brax

        config = peer_brax.purerl_config({"setting": setting}, 1_000_000)
        network = peer_brax.brax_sized_network(None)
    ppo = config.ppo
    env, env_params = make_env(config.env)
    hp = hyperparams_from_config(config)
    size = config.env.num_envs * ppo.num_steps
    inner = max(1, SAMPLES_PER_CALL // size)
    state = jax.jit(make_ppo(config, env, env_params, network=network).init)(
        jax.random.key(0), hp)
    agent = make_agent(config.env, config.network, env, env_params, network)
    space = env.action_space(env_params)
    num_actions = getattr(space, "n", 0)
    action_shape = () if num_actions else tuple(space.shape)
    batch = Batch(**random_batch({
        "obs": (size, *state.obs.shape[1:]), "action": (size, *action_shape),
        "log_prob": (size,), "value": (size,), "advantages": (size,), "returns": (size,)},
        num_actions, jax.random.key(1)))
    result = {}
    for name, optimizer in (("step_us", None), ("step_sgd_us", lambda h: optax.sgd(h.lr))):
        learner = make_learner(agent, [ppo_term(agent.policy, ppo.clip_value)],
                               batch_size=size, num_epochs=ppo.num_epochs,
                               num_minibatches=ppo.num_minibatches, prng_impl=config.prng_impl,
                               optimizer=optimizer)
        opt_state = learner.init_opt_state(state.params, hp)
        bits = jax.random.bits(jax.random.key(2), learner.shuffle_shape, jax.numpy.uint32)

        def learn(carry, batch, bits, learner=learner):
            learned = learner.learn(*carry, batch, bits, hp)
            return learned.params, learned.opt_state

        seconds = best_s(scanned(learn, inner), ((state.params, opt_state), batch, bits),
                         repeats)
        result[name] = 1e6 * seconds / (inner * ppo.num_epochs * ppo.num_minibatches)
    if peer == "rejax":
        result["update_us"] = {}
        for epochs in update_epochs(ppo.num_epochs):
            config.ppo.num_epochs = epochs
            algorithm = make_ppo(config, env, env_params)
            start = jax.jit(algorithm.init)(jax.random.key(0), hp)
            seconds = best_s(scanned(lambda s, a=algorithm: a.update(s)[0], inner), (start,),
                             repeats)
            result["update_us"][str(epochs)] = 1e6 * seconds / inner
    return result


def rejax_side(setting: str, repeats: int) -> dict:
    """rejax's step and update at its setting."""
    import jax
    import jax.numpy as jnp
    import peer_rejax
    import rejax
    from rejax.algos.ppo import AdvantageMinibatch, Trajectory

    settings = peer_rejax.REJAX_SETTINGS[setting]
    algo = rejax.get_algo("ppo").create(**settings)
    steps, envs = algo.num_steps, algo.num_envs
    inner = max(1, SAMPLES_PER_CALL // (steps * envs))
    space = algo.env.action_space(algo.env_params)
    values = random_batch({"obs": (steps, envs, *algo.env.observation_space(
        algo.env_params).shape), "action": (steps, envs), "log_prob": (steps, envs),
        "reward": (steps, envs), "value": (steps, envs), "advantages": (steps, envs),
        "targets": (steps, envs)}, space.n, jax.random.key(1))
    targets, advantages = values.pop("targets"), values.pop("advantages")
    batch = AdvantageMinibatch(Trajectory(**values, done=jnp.zeros((steps, envs), bool)),
                               advantages, targets)

    def learn(ts, batch):  # the epochs of rejax's `train_iteration`
        def epoch(ts, _):
            rng, minibatch_rng = jax.random.split(ts.rng)
            minibatches = algo.shuffle_and_split(batch, minibatch_rng)
            ts = jax.lax.scan(lambda t, mb: (algo.update(t, mb), None), ts.replace(rng=rng),
                              minibatches)[0]
            return ts, None

        return jax.lax.scan(epoch, ts, None, algo.num_epochs)[0]

    ts = algo.init_state(jax.random.key(0))
    seconds = best_s(scanned(learn, inner), (ts, batch), repeats)
    result = {"step_us": 1e6 * seconds / (inner * algo.num_epochs * algo.num_minibatches),
              "update_us": {}}
    for epochs in update_epochs(algo.num_epochs):
        algo_e = rejax.get_algo("ppo").create(**{**settings, "num_epochs": epochs})
        seconds = best_s(scanned(algo_e.train_iteration, inner),
                         (algo_e.init_state(jax.random.key(0)),), repeats)
        result["update_us"][str(epochs)] = 1e6 * seconds / inner
    return result


def brax_side(setting: str, repeats: int) -> dict:
    """Brax's PPO step at its setting."""
    import functools

    import jax
    import jax.numpy as jnp
    import optax
    import peer_brax
    from brax import envs
    from brax.training import types
    from brax.training.acme import running_statistics, specs
    from brax.training.agents.ppo import losses, networks

    settings = {**peer_brax.BRAX_DEFAULTS, **peer_brax.settings_of({"setting": setting})}
    env = envs.get_environment(settings["env"], backend=settings["backend"])
    obs_size, action_size = env.observation_size, env.action_size
    network = networks.make_ppo_networks(
        obs_size, action_size, preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=peer_brax.BRAX_NETWORKS["policy_hidden_layer_sizes"],
        value_hidden_layer_sizes=peer_brax.BRAX_NETWORKS["value_hidden_layer_sizes"])
    keys = jax.random.split(jax.random.key(0), 2)
    params = losses.PPONetworkParams(policy=network.policy_network.init(keys[0]),
                                     value=network.value_network.init(keys[1]))
    normalizer = running_statistics.init_state(specs.Array((obs_size,), jnp.dtype("float32")))
    optimizer = optax.adam(settings["learning_rate"])
    loss_and_grad = jax.value_and_grad(functools.partial(
        losses.compute_ppo_loss, ppo_network=network, entropy_cost=settings["entropy_cost"],
        discounting=settings["discounting"], reward_scaling=settings["reward_scaling"],
        gae_lambda=settings["gae_lambda"], clipping_epsilon=settings["clipping_epsilon"],
        normalize_advantage=settings["normalize_advantage"]), has_aux=True)
    minibatches, epochs = settings["num_minibatches"], settings["num_updates_per_batch"]
    sequences, length = settings["batch_size"] * minibatches, settings["unroll_length"]
    shape = (sequences, length)
    values = random_batch({"observation": (*shape, obs_size), "action": (*shape, action_size),
                           "reward": shape, "next_observation": (*shape, obs_size),
                           "raw_action": (*shape, action_size), "log_prob": shape,
                           "distribution_params": (*shape, 2 * action_size)}, 0,
                          jax.random.key(1))
    data = types.Transition(
        observation=values["observation"], action=values["action"], reward=values["reward"],
        discount=jnp.ones(shape), next_observation=values["next_observation"],
        extras={"policy_extras": {k: values[k] for k in ("raw_action", "log_prob",
                                                         "distribution_params")},
                "state_extras": {"truncation": jnp.zeros(shape)}})

    def minibatch_step(carry, minibatch):
        opt_state, params, key = carry
        key, key_loss = jax.random.split(key)
        grads = loss_and_grad(params, normalizer, minibatch, key_loss)[1]
        updates, opt_state = optimizer.update(grads, opt_state)
        return (opt_state, optax.apply_updates(params, updates), key), None

    def learn(carry, data):  # the epochs of Brax's training step
        def epoch(carry, _):
            opt_state, params, key = carry
            key, key_perm, key_grad = jax.random.split(key, 3)
            shuffled = jax.tree.map(lambda x: jax.random.permutation(key_perm, x).reshape(
                (minibatches, -1, *x.shape[1:])), data)
            opt_state, params, _ = jax.lax.scan(minibatch_step, (opt_state, params, key_grad),
                                                shuffled)[0]
            return (opt_state, params, key), None

        return jax.lax.scan(epoch, carry, None, epochs)[0]

    inner = max(1, SAMPLES_PER_CALL // (sequences * length))
    carry = (optimizer.init(params), params, jax.random.key(2))
    seconds = best_s(scanned(learn, inner), (carry, data), repeats)
    return {"step_us": 1e6 * seconds / (inner * epochs * minibatches)}


def derived(side: dict) -> dict:
    """`epoch_us` and `rollout_us` from a side's `update_us` at two epochs and the row's."""
    updates = {int(e): us for e, us in side.get("update_us", {}).items()}
    if len(updates) < 2:
        return {}
    (few, at_few), (many, at_many) = sorted(updates.items())
    epoch = (at_many - at_few) / (many - few)
    return {"epoch_us": epoch, "rollout_us": at_few - few * epoch}


def median_side(turns: list, side: str) -> dict:
    """Medians over the turns of each of a side's measurements (and the derived ones)."""
    runs = [{**turn[side], **derived(turn[side])} for turn in turns]
    medians = {}
    for name, value in runs[0].items():
        if isinstance(value, dict):
            medians[name] = {k: round(statistics.median(r[name][k] for r in runs), 1)
                             for k in value}
        else:
            medians[name] = round(statistics.median(r[name] for r in runs), 2)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", choices=sorted(SETTINGS), default="rejax")
    parser.add_argument("--peer-python", required=True, help="the peer's venv's Python")
    parser.add_argument("--setting", help="a setting of the peer's driver (default: its first)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--side", help=argparse.SUPPRESS)  # one side, in its own process
    args = parser.parse_args()
    setting = args.setting or SETTINGS[args.peer][0]
    if setting not in SETTINGS[args.peer]:
        parser.error(f"--peer {args.peer} takes --setting {' or '.join(SETTINGS[args.peer])}")
    if args.side:
        side = {"purerl": lambda: purerl_side(args.peer, setting, args.repeats),
                "rejax": lambda: rejax_side(setting, args.repeats),
                "brax": lambda: brax_side(setting, args.repeats)}[args.side]
        print(json.dumps(side()))
        return
    peer = PEERS[args.peer]
    sides = ("purerl", args.peer)  # the peer's side is named after it
    turns = []
    for turn in range(args.turns):
        turns.append({})
        for side in sides:
            env = side_env(peer, side)  # the drivers it imports are beside it
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(BENCHMARKS),
                                                              env.get("PYTHONPATH"))))
            output = subprocess.run(
                [side_python(peer, side, args.peer_python), __file__, "--peer", args.peer,
                 "--peer-python", args.peer_python, "--setting", setting, "--repeats",
                 str(args.repeats), "--side", side],
                env=env, capture_output=True, text=True, check=True).stdout
            turns[-1][side] = json.loads(output.strip().splitlines()[-1])
            print(f"turn {turn + 1} {side}: {turns[-1][side]}", flush=True)
    medians = {side: median_side(turns, side) for side in sides}
    ratios = {name: round(medians["purerl"][name] / medians[sides[1]][name], 3)
              for name in ("step_us", "epoch_us", "rollout_us")
              if name in medians["purerl"] and name in medians[sides[1]]}
    result = {"peer": args.peer, "setting": setting, "turns": args.turns,
              "repeats": args.repeats, "medians": medians, "purerl_over_peer": ratios,
              "per_turn": turns, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "purerl": git_state(REPO),
              "versions": package_versions(args.peer_python, peer.packages)}
    out = BENCHMARKS / "results" / f"peer_steps_{args.peer}_{setting}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"medians": medians, "purerl_over_peer": ratios}, indent=2))


if __name__ == "__main__":
    main()
