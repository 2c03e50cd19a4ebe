"""rejax's PPO (0.1.3) as shipped or lean, or purerl matching it, for `peers.py --peer rejax`:
`PYTHON peer_rejax.py SIDE PROGRAM OUT`, rejax under its venv, where purerl is not installed
(benchmarks/README.md: the settings, the sides and what differs)."""

from __future__ import annotations

import json
import os
import time

import harness  # this file's folder is first on sys.path
import jax
import numpy as np

SEED = 0
BOTH = {"agent_kwargs": {"activation": "tanh"}, "gae_lambda": 0.95, "clip_eps": 0.2,
        "ent_coef": 0.01, "vf_coef": 0.5}
REJAX_SETTINGS = {
    "cartpole": {**BOTH, "env": "CartPole-v1", "num_envs": 5, "num_steps": 100, "num_epochs": 5,
                 "num_minibatches": 5, "learning_rate": 0.00075, "max_grad_norm": 0.5,
                 "total_timesteps": 100_000, "eval_freq": 1000, "gamma": 0.99},
    "breakout": {**BOTH, "env": "Breakout-MinAtar", "num_envs": 32, "num_steps": 32,
                 "num_epochs": 4, "num_minibatches": 4, "learning_rate": 0.00025674088686342003,
                 "max_grad_norm": 1, "total_timesteps": 1_000_000, "eval_freq": 50_000,
                 "gamma": 0.995},
}
CURVES = {  # each side's curve
    "purerl": "each update's mean return of the episodes that ended in it",
    "purerl-warm": "as purerl's, a second run: the compile cache holds the program",
    "rejax": "rejax's evaluation: the mean return of 128 episodes, every eval_freq steps",
    "rejax-lean": "after each iteration, the mean over envs of each one's last finished episode",
}
PEERS = {"rejax": harness.Peer(
    "peer_rejax.py", ("rejax", "rejax-lean"),
    {"cartpole": [{"setting": "cartpole", "num_seeds": n} for n in (1, 8)],
     **{row: [{"setting": "breakout", "num_seeds": n} for n in seeds]
        for row, seeds in (("breakout", (1, 8)), ("breakout-gpu", (8, 64)))}},
    ["rejax", "jax", "jaxlib", "flax", "optax", "gymnax", "distrax", "numpy"],
    "python3.11 -m venv ../rejax-venv && ../rejax-venv/bin/pip install rejax==0.1.3 "
    "gymnax==0.0.9, then --peer-python ../rejax-venv/bin/python",
    # purerl as its command line runs it a second time (its compile cache warm), too
    purerl_sides=("purerl", "purerl-warm"), warm_sides=("purerl-warm",),
    compared_with=dict.fromkeys(("rejax", "rejax-lean"), ("purerl", "purerl-warm")),
    row_sides={"breakout-gpu": (("purerl",), ("rejax-lean",))}, accelerator_rows=("breakout-gpu",))}


def rejax_schedule(setting: dict, lean: bool) -> tuple[int, int, int]:
    """`(evaluations, iterations each, env steps per seed)` of rejax's `train` (rounded up)."""
    iteration = setting["num_envs"] * setting["num_steps"]
    eval_freq = iteration if lean else setting["eval_freq"]
    evaluations = -(-setting["total_timesteps"] // eval_freq)
    iterations = -(-eval_freq // iteration)
    return evaluations, iterations, evaluations * iterations * iteration


def settings_of(spec: dict) -> dict:
    """A copy of a program's rejax settings, its budget (and `eval_freq`) and epochs set."""
    setting = json.loads(json.dumps(REJAX_SETTINGS[spec["setting"]]))  # a deep copy
    total = int(spec.get("total_timesteps") or setting["total_timesteps"])
    setting.update(total_timesteps=total, eval_freq=min(setting["eval_freq"], total),
                   num_epochs=int(spec.get("num_epochs") or setting["num_epochs"]))
    return setting


def rejax_program(spec: dict, lean: bool):
    """`(train, key, env steps per seed, curve)` of rejax's PPO; `curve(output)` gives the
    curve's steps, returns (a mean over the seeds) and wall clock at each (None lean)."""
    import rejax

    setting = settings_of(spec)
    evaluations, iterations, env_steps = rejax_schedule(setting, lean)
    iteration = setting["num_envs"] * setting["num_steps"]
    if lean:
        setting.update(eval_freq=iteration, skip_initial_evaluation=True)
    algo = rejax.get_algo("ppo").create(**setting)
    stamps = {}  # {global step: wall clock} of the first seed's evaluations
    if lean:
        from gymnax.wrappers.purerl import LogWrapper

        # rejax deep-copies its env on every `init_state`: a copy of the wrapper is itself
        logged = type("Logged", (LogWrapper,), {"__deepcopy__": lambda self, memo: self})
        algo = algo.replace(env=logged(algo.env), eval_callback=lambda algo, ts, rng:
                            ts.env_state.returned_episode_returns.mean())  # 0 before an end
    else:
        def stamp(step, _):
            stamps.setdefault(int(np.asarray(step).reshape(-1)[0]), time.time())

        def evaluate(algo, ts, rng, shipped=algo.eval_callback):
            lengths, returns = shipped(algo, ts, rng)
            # after the evaluation (its mean an argument); ordered, or XLA may run a stamp late
            jax.debug.callback(stamp, ts.global_step, returns.mean(), ordered=True)
            return lengths, returns

        algo = algo.replace(eval_callback=evaluate)
    train, key = algo.train, jax.random.PRNGKey(SEED)
    if spec["num_seeds"] != 1:
        train, key = jax.vmap(train), jax.random.split(key, spec["num_seeds"])
    steps = [iterations * iteration * k for k in range(int(lean), evaluations + 1)]  # 0: shipped

    def curve(output):
        # shipped: (lengths, returns), each [(S,) E, 128 episodes]; lean: returns [(S,) E]
        returns = np.asarray(output[1] if lean else output[1][1], dtype=np.float64)
        returns = returns.reshape(spec["num_seeds"], len(steps), -1).mean(axis=(0, 2))
        return steps, returns.tolist(), [stamps.get(step) for step in steps] if stamps else None

    return train, key, env_steps, curve


def purerl_config(spec: dict):
    """purerl's `Config` matching rejax's program at rejax-lean's budget."""
    from purerl.config import Config, EnvConfig, NetworkConfig, PPOConfig

    setting = settings_of(spec)
    same = ("num_steps", "num_epochs", "num_minibatches", "gamma", "gae_lambda", "clip_eps",
            "ent_coef", "vf_coef")  # under the same names
    return Config(
        total_timesteps=rejax_schedule(setting, lean=True)[2], num_seeds=spec["num_seeds"],
        env=EnvConfig(name=setting["env"], num_envs=setting["num_envs"]),
        ppo=PPOConfig(lr=setting["learning_rate"], anneal_lr=False, clip_value=True,
                      max_grad_norm=float(setting["max_grad_norm"]),
                      **{name: setting[name] for name in same}),
        network=NetworkConfig(hidden_sizes=[64, 64],
                              activation=setting["agent_kwargs"]["activation"]))


def measure(spec: dict, side: str, launched: float) -> dict:
    """One program of `side`, compiled and run: its result, JSON-ready."""
    harness.start_jax(os.environ[harness.WARM_CACHE] if side == "purerl-warm" else None)
    startup_s = harness.seconds_since(launched)
    if side.startswith("purerl"):
        run = harness.purerl_side(purerl_config(spec), launched=launched)
    else:
        run = harness.program_side(*rejax_program(spec, side == "rejax-lean"), launched)
    return harness.side_result(spec, side, REJAX_SETTINGS[spec["setting"]]["env"], run,
                               kind=CURVES[side], startup_s=startup_s, launched=launched,
                               num_seeds=spec["num_seeds"])


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], tuple(CURVES), measure)
