"""Compiles and runs one whole-run PPO program of rejax or of purerl configured to match, for
`peers.py --peer rejax`; one program per process, so that its start-up and peak memory are its own.

    REJAX_PYTHON benchmarks/peer_rejax.py rejax '{"setting": "cartpole", "num_seeds": 1}' OUT
    REJAX_PYTHON benchmarks/peer_rejax.py rejax-lean '{"setting": "breakout", "num_seeds": 8}' OUT
    python benchmarks/peer_rejax.py purerl '{"setting": "cartpole", "num_seeds": 1}' OUT

rejax (PyPI `rejax`, measured at 0.1.3: jax, flax, optax and gymnax as purerl's, jax 0.10.2)
runs under its venv's Python, where purerl is not installed: this file imports nothing of purerl
or rejax at its top. A program is `{"setting", "num_seeds"}` (and `"total_timesteps"` to cut the
budget for a check, `"num_epochs"` to change the epochs); the settings are rejax's own PPO
settings for its two envs here:

- cartpole: its `configs/gymnax/cartpole.yaml` `ppo` (gymnax CartPole-v1, 5 envs x 100 steps,
  5 epochs x 5 minibatches, lr 7.5e-4 constant, 1e5 steps, an evaluation every 1,000 steps).
- breakout: its `benchmark/breakout_1m.yaml` `ppo`, the setting of its published speed-up
  over CleanRL (Breakout-MinAtar, 32 envs x 32 steps, 4 epochs x 4 minibatches, lr 2.57e-4
  constant, gamma 0.995, 1e6 steps, an evaluation every 50,000 steps).

Both: two 64x64 tanh MLPs (policy and value; on MinAtar the 10x10x4 image flattened, no CNN),
gae_lambda 0.95, clip 0.2 (ratio and value), entropy 0.01, value coefficient 0.5. Several seeds
are `jax.vmap(algo.train)` over split keys, as rejax's README does. The sides:

- rejax: as shipped, `rejax.get_algo("ppo").create(**setting)` and `algo.train`: inside the
  program, every `eval_freq` steps (and once before training) its evaluation plays 128 episodes
  of the stochastic policy to their end (a `while_loop` up to the env's 500 or 1,000 steps);
  its curve is that evaluation's mean return. On CartPole that is up to 64,000 env steps of
  inference every 1,000 of training, most of the program's work once the policy is good. As
  the evaluations grow longer while the policy learns, the wall clock is taken after each
  (an ordered `jax.debug.callback`, as rejax's `benchmark/train.py` logs each evaluation
  through a host callback) and time to the return read from it.
- rejax-lean: the same algorithm without that evaluation: the env wrapped in gymnax's
  `LogWrapper` (the episode statistics purerl and PureJaxRL keep) and `eval_callback`
  replaced by the mean over envs of each env's last finished episode's return, after every
  iteration (`eval_freq` = one iteration, no evaluation before training); its curve is that.
- purerl: `purerl.make_train` at the same env, budget, envs, steps, epochs, minibatches, lr
  (not annealed), gamma, lambda, clips, coefficients, network sizes and activation; its curve
  is each update's mean return of the episodes that ended in it.
- purerl-warm: the same program run again, as a user's second run of purerl's command line
  finds it: JAX's persistent compilation cache (on by default in purerl's command line, none
  in rejax) at `$PEER_COMPILE_CACHE` already holds it (`peers.py` runs this side once before
  the turns to fill it), so its compile is tracing, lowering and loading the cached program.

What stays different, and the work it changes: rejax draws its Dense kernels lecun-normal,
purerl orthogonal (gain sqrt 2, 0.01 for the policy's output, 1 for the value's); rejax keeps an
optimizer per network, each clipping every gradient element to `max_grad_norm` (`optax.clip`)
with Adam's eps 1e-8, purerl one optimizer over both towers clipping the global norm, eps 1e-5;
rejax treats an episode's time limit as its end (gymnax's `done`), purerl bootstraps a
truncated step from its true next observation; rejax uses JAX's default threefry PRNG, purerl
`unsafe_rbg`. The work per env step is otherwise the same: one policy and one value pass per
rollout step, the same minibatch passes, forward and backward.

Each run: JAX's persistent cache off (but on purerl-warm's), JAX started before timing; then
lowering + compile (timed as compile) and one call of the compiled program (timed as training).
JSON to OUT: the timings, the curve (env steps of one seed, return: a mean over the seeds), its
final return (the mean of the curve's last 5%), time to the return of `peer_curves.THRESHOLDS`
from the process's start, and the process's peak resident memory.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports, which a user waits for too

import json  # noqa: E402
import os  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import peer_curves as curves  # noqa: E402  (this file's folder is first on sys.path)
from harness import compile_and_run, purerl_curve, start_jax  # noqa: E402

SEED = 0
# rejax's PPO settings (keraJLi/rejax configs/gymnax/cartpole.yaml, benchmark/breakout_1m.yaml).
REJAX_SETTINGS = {
    "cartpole": {
        "env": "CartPole-v1", "agent_kwargs": {"activation": "tanh"}, "num_envs": 5,
        "num_steps": 100, "num_epochs": 5, "num_minibatches": 5, "learning_rate": 0.00075,
        "max_grad_norm": 0.5, "total_timesteps": 100_000, "eval_freq": 1000, "gamma": 0.99,
        "gae_lambda": 0.95, "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5,
    },
    "breakout": {
        "env": "Breakout-MinAtar", "agent_kwargs": {"activation": "tanh"}, "num_envs": 32,
        "num_steps": 32, "num_epochs": 4, "num_minibatches": 4,
        "learning_rate": 0.00025674088686342003, "max_grad_norm": 1,
        "total_timesteps": 1_000_000, "eval_freq": 50_000, "gamma": 0.995, "gae_lambda": 0.95,
        "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5,
    },
}
SIDES = ("purerl", "purerl-warm", "rejax", "rejax-lean")
# What each side's curve is.
CURVES = {
    "purerl": "each update's mean return of the episodes that ended in it",
    "purerl-warm": "as purerl's, a second run: the compile cache holds the program",
    "rejax": "rejax's evaluation: the mean return of 128 episodes, every eval_freq steps",
    "rejax-lean": "after each iteration, the mean over envs of each one's last finished episode",
}


def rejax_schedule(setting: dict, lean: bool) -> tuple[int, int, int]:
    """How rejax's `train` splits the budget: `ceil(total / eval_freq)` evaluations, each after
    `ceil(eval_freq / iteration)` iterations of `num_envs x num_steps` steps.

    Args:
        setting: rejax's settings (`total_timesteps`, `eval_freq`, `num_envs`, `num_steps`).
        lean: whether `eval_freq` is one iteration (the rejax-lean side).

    Returns:
        `(evaluations, iterations per evaluation, env steps per seed trained in all)`.
    """
    iteration = setting["num_envs"] * setting["num_steps"]
    eval_freq = iteration if lean else setting["eval_freq"]
    evaluations = -(-setting["total_timesteps"] // eval_freq)
    iterations = -(-eval_freq // iteration)
    return evaluations, iterations, evaluations * iterations * iteration


def settings_of(spec: dict) -> dict:
    """rejax's settings of a program.

    Args:
        spec: the program: `"setting"` names REJAX_SETTINGS' entry; `"total_timesteps"`, if
            there, cuts its budget (and `eval_freq` to at most that); `"num_epochs"`, if there,
            replaces its epochs.

    Returns:
        A copy of the settings, as `PPO.create` takes them.
    """
    setting = json.loads(json.dumps(REJAX_SETTINGS[spec["setting"]]))  # a deep copy
    if spec.get("total_timesteps"):
        setting["total_timesteps"] = int(spec["total_timesteps"])
        setting["eval_freq"] = min(setting["eval_freq"], setting["total_timesteps"])
    if spec.get("num_epochs"):
        setting["num_epochs"] = int(spec["num_epochs"])
    return setting


def vmapped(train, num_seeds: int):
    """A whole-run function and its key for `num_seeds` seeds.

    Args:
        train: the function of one key.
        num_seeds: how many seeds.

    Returns:
        `(train, key)` with one seed; `(jax.vmap(train), split keys)` with several.
    """
    key = jax.random.PRNGKey(SEED)
    if num_seeds == 1:
        return train, key
    return jax.vmap(train), jax.random.split(key, num_seeds)


def rejax_program(spec: dict, lean: bool):
    """rejax's PPO at a program's setting, as shipped or lean.

    Args:
        spec: the program, `{"setting", "num_seeds"}` (and `"total_timesteps"`).
        lean: the rejax-lean side (its evaluation replaced by the training return).

    Returns:
        `(train, key, env steps per seed, curve)`; `curve(output)` gives the curve's env steps,
        returns (a mean over the seeds) and, as shipped, the wall clock at each point (None
        lean, where the work per point is even).
    """
    import rejax

    setting = settings_of(spec)
    evaluations, iterations, env_steps = rejax_schedule(setting, lean)
    iteration = setting["num_envs"] * setting["num_steps"]
    if lean:
        setting.update(eval_freq=iteration, skip_initial_evaluation=True)
    algo = rejax.get_algo("ppo").create(**setting)
    stamps = {}
    if lean:
        algo = algo.replace(env=logged(algo.env), eval_callback=last_episode_returns)
    else:
        algo = algo.replace(eval_callback=stamped(algo.eval_callback, stamps))
    train, key = vmapped(algo.train, spec["num_seeds"])
    first = iterations * iteration
    steps = [first * k for k in range(1, evaluations + 1)]
    if not lean:
        steps = [0, *steps]  # the evaluation before training

    def curve(output):
        evaluation = output[1]
        # shipped: (lengths, returns), each [(S,) E, 128 episodes]; lean: returns [(S,) E]
        returns = np.asarray(evaluation if lean else evaluation[1], dtype=np.float64)
        returns = returns.reshape(spec["num_seeds"], len(steps), -1).mean(axis=(0, 2))
        return steps, returns.tolist(), [stamps.get(step) for step in steps] if stamps else None

    return train, key, env_steps, curve


def stamped(evaluate, stamps: dict):
    """rejax's `eval_callback` with the wall clock taken when each evaluation is done, as
    rejax's own `benchmark/train.py` logs through a host callback: the evaluations grow
    longer as the policy learns, so the training's share of steps is no measure of their time.

    Args:
        evaluate: rejax's `eval_callback(algo, ts, rng)`.
        stamps: filled with `{global step: seconds since the epoch}` (the first seed's, under
            vmap) as the program runs.

    Returns:
        The callback, its output unchanged.
    """
    def stamp(step, _):
        stamps.setdefault(int(np.asarray(step).reshape(-1)[0]), time.time())

    def evaluate_and_stamp(algo, ts, rng):
        lengths, returns = evaluate(algo, ts, rng)
        # after the evaluation (its mean an argument); ordered, or XLA may run a stamp late
        jax.debug.callback(stamp, ts.global_step, returns.mean(), ordered=True)
        return lengths, returns

    return evaluate_and_stamp


def logged(env):
    """`env` in gymnax's `LogWrapper`, which rejax can deep-copy (its `Algorithm.config` does,
    on every `init_state`; gymnax's wrappers recurse there): a copy is the same stateless
    wrapper."""
    from gymnax.wrappers.purerl import LogWrapper

    class Logged(LogWrapper):
        def __deepcopy__(self, memo):
            return self

    return Logged(env)


def last_episode_returns(algo, ts, rng):
    """rejax-lean's `eval_callback`: the mean over envs of each env's last finished episode's
    return, as gymnax's `LogWrapper` keeps it (0 until an env's first episode ends)."""
    del algo, rng
    return ts.env_state.returned_episode_returns.mean()


def purerl_config(spec: dict, env_steps: int):
    """purerl's settings matching a rejax program's.

    Args:
        spec: the program, `{"setting", "num_seeds"}` (and `"total_timesteps"`).
        env_steps: the budget per seed (the rejax-lean side's, as rejax rounds it).

    Returns:
        The `purerl.config.Config`.
    """
    from purerl.config import Config, EnvConfig, NetworkConfig, PPOConfig

    setting = settings_of(spec)
    return Config(
        total_timesteps=env_steps, num_seeds=spec["num_seeds"],
        env=EnvConfig(name=setting["env"], num_envs=setting["num_envs"]),
        ppo=PPOConfig(num_steps=setting["num_steps"], num_epochs=setting["num_epochs"],
                      num_minibatches=setting["num_minibatches"], lr=setting["learning_rate"],
                      anneal_lr=False, gamma=setting["gamma"], gae_lambda=setting["gae_lambda"],
                      clip_eps=setting["clip_eps"], clip_value=True,
                      ent_coef=setting["ent_coef"], vf_coef=setting["vf_coef"],
                      max_grad_norm=float(setting["max_grad_norm"])),
        network=NetworkConfig(hidden_sizes=[64, 64],
                              activation=setting["agent_kwargs"]["activation"]))


def purerl_program(spec: dict):
    """purerl's whole-run program matching a rejax program, at the rejax-lean side's budget.

    Args:
        spec: the program, `{"setting", "num_seeds"}` (and `"total_timesteps"`).

    Returns:
        `(train, key, env steps per seed, curve)`, as `rejax_program` gives them.
    """
    import purerl

    env_steps = rejax_schedule(settings_of(spec), lean=True)[2]
    config = purerl_config(spec, env_steps)
    purerl.validate(config, jax.local_device_count())

    def curve(output):
        return *purerl_curve(config, output[1]), None

    return purerl.make_train(config), jax.random.key(SEED), env_steps, curve


def measure(spec: dict, side: str, launched: float) -> dict:
    """One program of `side`, compiled and run, and what its curve and process show.

    Args:
        spec: the program, `{"setting", "num_seeds"}` (and `"total_timesteps"`).
        side: one of SIDES.
        launched: when this process was launched, seconds since the epoch.

    Returns:
        The result, JSON-ready.
    """
    start_jax(os.environ[curves.WARM_CACHE] if side == "purerl-warm" else None)
    startup_s = curves.seconds_since(launched)
    train, key, env_steps, curve = (purerl_program(spec) if side.startswith("purerl")
                                    else rejax_program(spec, lean=side == "rejax-lean"))
    timings, output = compile_and_run(train, key)
    before_train_s = round(curves.seconds_since(launched) - timings["train_s"], 3)
    steps, returns, times = curve(output)
    run = {**timings, "before_train_s": before_train_s, "env_steps": env_steps,
           "steps": steps, "returns": returns, "times": times}
    return curves.side_result(spec, side, REJAX_SETTINGS[spec["setting"]]["env"], run,
                              kind=CURVES[side], startup_s=startup_s, launched=launched,
                              num_seeds=spec["num_seeds"])


def main() -> None:
    curves.driver_main(__doc__.splitlines()[0], SIDES, measure, STARTED)


if __name__ == "__main__":
    main()
