"""Brax's PPO (`ppo.train`, brax 0.14.2, as shipped or lean) or purerl matching it, for
`peers.py --peer brax`: `BRAX_PYTHON peer_brax.py SIDE PROGRAM OUT`, all sides under a venv with
`purerl[brax]`.

A program is `{"setting"}` (optionally `"total_timesteps"`, `"num_envs"`, `"batch_size"`,
`"num_epochs"`): inverted_pendulum is the PPO entry of Brax's notebooks/training.ipynb (2M
steps, 20 evals, 2048 envs, batch_size 1024); hopper takes the setting its PPO entries share at
256 envs, batch_size 256, 1M steps, 5 evals; brax 0.14.2's defaults otherwise (checked when a
brax side starts), backend `positional`. Sides: brax as shipped (curve: its evaluations of 128
episodes); brax-lean (no evaluations; curve: episode/sum_reward after each update); purerl
(`make_train` at brax-lean's budget); purerl-eval (`purerl.run` at brax's budget, evaluating
128 sampled episodes where Brax does). purerl matches the update (each env runs batch_size x
num_minibatches x unroll_length / num_envs steps), epochs, minibatches, lr, gamma, lambda, clip
0.3 (no value clip), coefficients, observation normalization, no gradient clipping, the networks
(4 x 32 policy and 5 x 256 value MLPs, swish, lecun-uniform) and 1000-step episodes. Different:
Brax's GAE runs per minibatch over 5-step sequences, it scales rewards by 10, its policy is a
tanh-squashed Gaussian with a state-dependent scale (purerl's clipped, learned log-std), it
masks truncated steps (purerl bootstraps), uses Adam eps 1e-8 and threefry. Brax's compile
time is the sum of JAX's compile events in its call."""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports, which a user waits for too

import inspect  # noqa: E402
import tempfile  # noqa: E402

import harness  # noqa: E402  (this file's folder is first on sys.path)
import jax  # noqa: E402

SEED = 0
# The PPO setting that notebooks/training.ipynb's inverted_pendulum, inverted_double_pendulum
# and ant entries share.
NOTEBOOK_PPO = {"reward_scaling": 10, "episode_length": 1000, "normalize_observations": True,
                "action_repeat": 1, "unroll_length": 5, "num_minibatches": 32,
                "num_updates_per_batch": 4, "discounting": 0.97, "learning_rate": 3e-4,
                "entropy_cost": 1e-2}
BRAX_SETTINGS = {  # each row's env, Brax pipeline and `ppo.train` settings
    "inverted_pendulum": {"env": "inverted_pendulum", "backend": "positional",
                          "num_timesteps": 2_000_000, "num_evals": 20, **NOTEBOOK_PPO,
                          "num_envs": 2048, "batch_size": 1024},
    "hopper": {"env": "hopper", "backend": "positional", "num_timesteps": 1_000_000,
               "num_evals": 5, **NOTEBOOK_PPO, "num_envs": 256, "batch_size": 256},
}
# `ppo.train`'s and `make_ppo_networks`' defaults in brax 0.14.2 that purerl's side matches.
BRAX_DEFAULTS = {"gae_lambda": 0.95, "clipping_epsilon": 0.3, "clipping_epsilon_value": None,
                 "vf_loss_coefficient": 0.5, "max_grad_norm": None, "normalize_advantage": True,
                 "learning_rate_schedule": None, "num_eval_envs": 128}
BRAX_NETWORKS = {"policy_hidden_layer_sizes": (32,) * 4, "value_hidden_layer_sizes": (256,) * 5,
                 "activation": "swish"}
CURVES = {  # what each side's curve is
    "purerl": "each update's mean return of the episodes that ended in it",
    "purerl-eval": "purerl's evaluation (eval_return/1.0): the mean return of 128 episodes, "
                   "sampled as Brax's are, after each stretch of training",
    "brax": "Brax's evaluation (eval/episode_reward): the mean return of 128 episodes, before "
            "training and after each stretch of it",
    "brax-lean": "Brax's training metric episode/sum_reward after each update: the mean "
                 "return of the last 100 episodes that ended",
}
SIDES = tuple(CURVES)
PEERS = {"brax": harness.Peer(
    "peer_brax.py", ("brax", "brax-lean"), {row: [{"setting": row}] for row in BRAX_SETTINGS},
    ["brax", "mujoco", "mujoco-mjx", "jax", "jaxlib", "flax", "optax", "numpy"],
    "python3.11 -m venv ../brax-venv && ../brax-venv/bin/pip install -e '.[brax]' jax==0.10.2 "
    "jaxlib==0.10.2 (both sides run there), then --peer-python ../brax-venv/bin/python",
    # Brax's shipped inverted_pendulum run took 4.7 minutes on a quiet 2-core CPU, 10-20 busy
    purerl_in_peer_python=True, hung_after_s=3600, purerl_sides=("purerl", "purerl-eval"),
    # as shipped against purerl with its evaluations and lean; lean against lean
    compared_with={"brax": ("purerl-eval", "purerl")})}


def settings_of(spec: dict) -> dict:
    """A program's BRAX_SETTINGS entry, overridden; a cut budget keeps <= 1 eval per update."""
    setting = dict(BRAX_SETTINGS[spec["setting"]])
    setting.update({k: int(spec[k]) for k in ("num_envs", "batch_size") if spec.get(k)})
    if spec.get("total_timesteps"):
        setting["num_timesteps"] = int(spec["total_timesteps"])
        updates = max(1, setting["num_timesteps"] // update_steps(setting))
        setting["num_evals"] = min(setting["num_evals"], 1 + updates)
    if spec.get("num_epochs"):
        setting["num_updates_per_batch"] = int(spec["num_epochs"])
    return setting


def update_steps(s: dict) -> int:
    """Env steps of one Brax update: `batch_size x num_minibatches` sequences of `unroll_length`."""
    return s["batch_size"] * s["num_minibatches"] * s["unroll_length"] * s["action_repeat"]


def brax_schedule(setting: dict, num_evals: int) -> tuple[int, int, int]:
    """`(stretches, updates per stretch, env steps in all)` of `ppo.train`: `max(num_evals - 1,
    1)` stretches between evaluations, each `ceil(num_timesteps / (stretches x update))`."""
    stretches, update = max(num_evals - 1, 1), update_steps(setting)
    updates = -(-setting["num_timesteps"] // (stretches * update))
    return stretches, updates, stretches * updates * update


def purerl_num_steps(setting: dict) -> int:
    """purerl's `ppo.num_steps` for Brax's update: `batch_size x num_minibatches x
    unroll_length / num_envs`."""
    sequences = setting["batch_size"] * setting["num_minibatches"]
    if sequences % setting["num_envs"]:
        raise ValueError(f"batch_size x num_minibatches = {sequences} is not a multiple of "
                         f"num_envs = {setting['num_envs']}, as Brax's ppo.train requires")
    return sequences // setting["num_envs"] * setting["unroll_length"]


def brax_run(spec: dict, lean: bool, launched: float) -> dict:
    """Brax's `ppo.train` at a program's setting, as shipped or lean, timed."""
    if not hasattr(jax, "device_put_replicated"):  # brax 0.14.2 calls it, jax 0.10 hid it
        from jax._src import api

        jax.device_put_replicated = api.device_put_replicated
    import flax.linen
    from brax import envs
    from brax.training.agents.ppo import networks, train as ppo

    found = {k: p.default for f in (ppo.train, networks.make_ppo_networks)
             for k, p in inspect.signature(f).parameters.items()}
    if found["activation"] is getattr(flax.linen, BRAX_NETWORKS["activation"]):  # silu's alias
        found["activation"] = BRAX_NETWORKS["activation"]
    if differ := {k: found.get(k) for k, v in {**BRAX_DEFAULTS, **BRAX_NETWORKS}.items()
                  if found.get(k) != v}:
        raise SystemExit(f"peer_brax.py: this brax's ppo.train defaults differ from those "
                         f"purerl's side matches (measured at brax 0.14.2): {differ}")
    setting = settings_of(spec)
    name, backend = setting.pop("env"), setting.pop("backend")
    if lean:
        setting.update(num_evals=0, run_evals=False, log_training_metrics=True)
    num_evals, key = setting["num_evals"], "episode/sum_reward" if lean else "eval/episode_reward"
    points, last = [], {}

    def progress(step, metrics):
        at, value = time.time(), metrics.get(key)
        last.update(metrics)
        points.append((int(step), float("nan" if value is None else value), at))

    jax.monitoring.register_event_duration_secs_listener(clock := harness.CompileClock())
    environment = envs.get_environment(name, backend=backend)
    called = time.time()
    ppo.train(environment=environment, seed=SEED, progress_fn=progress, **setting)
    call_s, compile_s = time.time() - called, clock.seconds()
    steps, returns, times = (list(column) for column in zip(*points)) if points else ([],) * 3
    return {"lower_s": round(clock.seconds(harness.LOWERING_EVENTS), 3),
            "compile_s": round(compile_s, 3),
            "train_s": round(call_s - compile_s, 3),
            "before_train_s": round(called - launched + compile_s, 3),
            **{f"brax_{n}_walltime_s": round(float(last[f"{n}/walltime"]), 3)
               if f"{n}/walltime" in last else None for n in ("training", "eval")},
            "env_steps": brax_schedule(setting, num_evals)[2],
            "evaluations": 0 if lean else (num_evals > 1) + max(num_evals - 1, 1),
            "steps": steps, "returns": returns, "times": times}


def purerl_config(spec: dict, env_steps: int):
    """purerl's `Config` matching a Brax program, for a budget of `env_steps`."""
    from purerl.config import Config, EnvConfig, PPOConfig

    s = settings_of(spec)
    if (s["episode_length"], s["action_repeat"]) != (1000, 1):
        raise ValueError("purerl's Brax adapter runs episodes of 1000 steps, no action repeat")
    return Config(
        total_timesteps=env_steps, num_seeds=1,
        env=EnvConfig(name=f"brax/{s['env']}", backend=s["backend"], num_envs=s["num_envs"],
                      normalize_obs=s["normalize_observations"], clip_obs=1e6),
        ppo=PPOConfig(num_steps=purerl_num_steps(s), num_epochs=s["num_updates_per_batch"],
                      num_minibatches=s["num_minibatches"], lr=s["learning_rate"],
                      anneal_lr=False, gamma=s["discounting"],
                      gae_lambda=BRAX_DEFAULTS["gae_lambda"],
                      clip_eps=BRAX_DEFAULTS["clipping_epsilon"], clip_value=False,
                      ent_coef=s["entropy_cost"], vf_coef=BRAX_DEFAULTS["vf_loss_coefficient"],
                      max_grad_norm=1e10))  # global-norm clipping must be > 0: none in effect


def purerl_run(spec: dict, evals: bool, launched: float) -> dict:
    """purerl with Brax's networks: lean, `make_train` at brax-lean's budget, compiled and run
    (`times` None: read off the steady rate); with `evals`, `purerl.run` at brax's budget."""
    import flax.linen as nn

    import purerl

    setting = settings_of(spec)
    _, updates, env_steps = brax_schedule(setting, setting["num_evals"] if evals else 0)
    config = purerl_config(spec, env_steps)
    activation = getattr(nn, BRAX_NETWORKS["activation"])

    def mlp(x, sizes):  # lecun-uniform kernels, zero biases
        *hidden, out = sizes
        for size in hidden:
            x = activation(nn.Dense(size, kernel_init=nn.initializers.lecun_uniform())(x))
        return nn.Dense(out, kernel_init=nn.initializers.lecun_uniform())(x)

    class BraxTowers(nn.Module):  # the policy gives the Gaussian's mean; purerl learns its log-std
        num_outputs: int

        @nn.compact
        def __call__(self, obs):
            mean = mlp(obs, (*BRAX_NETWORKS["policy_hidden_layer_sizes"], self.num_outputs))
            return mean, mlp(obs, (*BRAX_NETWORKS["value_hidden_layer_sizes"], 1))[:, 0]

    def factory(obs_shape, action_spec, network_config):
        return BraxTowers(action_spec.num_outputs)

    if not evals:
        return {**harness.purerl_side(config, {"network": factory}, launched),
                "purerl": purerl.__file__}
    from purerl.config import EvalConfig, LogConfig
    from purerl.runs.events import Event

    config.eval = EvalConfig(every=updates, num_episodes=BRAX_DEFAULTS["num_eval_envs"],
                             temperatures=[1.0])  # sampled actions, as Brax's
    config.log = LogConfig(progress=False)
    config.compile_cache = None  # every compile cold, as on the other sides
    points = []

    class EvaluationClock(Event):  # each evaluation's env steps, mean return and wall clock
        def due(self, run, chunk):
            return chunk.evaluated

        def handle(self, run, chunk):
            value = next(iter(run.history.evals[-1]["returns"].values()))
            points.append((run.env_steps, float("nan") if value is None else value, time.time()))

    called = time.time()
    with tempfile.TemporaryDirectory() as run_dir:
        summary = purerl.run(config, run_dir, [EvaluationClock()], network=factory)
    call_s, compile_s = time.time() - called, summary["compile_s"]
    steps, returns, times = (list(column) for column in zip(*points))
    return {"lower_s": None, "compile_s": round(compile_s, 3),
            "train_s": round(call_s - compile_s, 3),
            "before_train_s": round(called - launched + compile_s, 3),
            "env_steps": env_steps, "evaluations": len(steps), "purerl": purerl.__file__,
            "steps": steps, "returns": returns, "times": times}


def measure(spec: dict, side: str, launched: float) -> dict:
    """One run of a side, its result JSON-ready (`harness.side_result`)."""
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    run = (purerl_run(spec, side == "purerl-eval", launched) if side.startswith("purerl")
           else brax_run(spec, side == "brax-lean", launched))
    return harness.side_result(spec, side, f"brax/{BRAX_SETTINGS[spec['setting']]['env']}", run,
                              kind=CURVES[side], startup_s=startup_s, launched=launched)


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], SIDES, measure, STARTED)
