"""Brax's PPO (`ppo.train`, brax 0.14.2, as shipped or lean) or purerl matching it, for
`peers.py --peer brax`: `BRAX_PYTHON peer_brax.py SIDE PROGRAM OUT`, all sides under a venv with
`purerl[brax]` (benchmarks/README.md: the settings, the sides and what differs). A program is
`{"setting"}`, optionally with `"total_timesteps"`, `"num_envs"`, `"batch_size"`, `"num_epochs"`."""

import inspect
import tempfile
import time

import harness  # before jax: its import stamps the start (this folder is first on sys.path)
import jax
from flax import linen as nn

# The PPO setting of notebooks/training.ipynb's inverted_pendulum, inverted_double_pendulum, ant
NOTEBOOK_PPO = {"reward_scaling": 10, "episode_length": 1000, "normalize_observations": True,
                "action_repeat": 1, "unroll_length": 5, "num_minibatches": 32,
                "num_updates_per_batch": 4, "discounting": 0.97, "learning_rate": 3e-4,
                "entropy_cost": 1e-2}
BRAX_SETTINGS = {  # each row's env, Brax pipeline and `ppo.train` settings
    "inverted_pendulum": {"env": "inverted_pendulum", "backend": "positional", **NOTEBOOK_PPO,
                          "num_timesteps": 2_000_000, "num_evals": 20, "num_envs": 2048,
                          "batch_size": 1024},
    "hopper": {"env": "hopper", "backend": "positional", **NOTEBOOK_PPO,
               "num_timesteps": 1_000_000, "num_evals": 5, "num_envs": 256, "batch_size": 256}}
# `ppo.train`'s and `make_ppo_networks`' defaults in brax 0.14.2 that purerl's side matches
BRAX_DEFAULTS = {"gae_lambda": 0.95, "clipping_epsilon": 0.3, "clipping_epsilon_value": None,
                 "vf_loss_coefficient": 0.5, "max_grad_norm": None, "normalize_advantage": True,
                 "learning_rate_schedule": None, "num_eval_envs": 128, "activation": nn.swish,
                 "policy_hidden_layer_sizes": (32,) * 4, "value_hidden_layer_sizes": (256,) * 5}
LECUN = nn.initializers.lecun_uniform()  # Brax's kernel init (its biases zero, as flax's)
CURVES = {"purerl": "each update's mean return of the episodes that ended in it",
          "purerl-eval": "purerl's evaluation (eval_return/1.0): the mean return of 128 "
                         "episodes, sampled as Brax's are, after each stretch of training",
          "brax": "Brax's evaluation (eval/episode_reward): the mean return of 128 episodes, "
                  "before training and after each stretch of it",
          "brax-lean": "Brax's training metric episode/sum_reward after each update: the mean "
                       "return of the last 100 episodes that ended"}
PEERS = {"brax": harness.Peer(
    "peer_brax.py", ("brax", "brax-lean"),
    {**{row: [{"setting": row}] for row in BRAX_SETTINGS}, "gpu": [  # an accelerator's sizes
        {"setting": "inverted_pendulum", "num_envs": 4096, "total_timesteps": 10_000_000},
        {"setting": "inverted_pendulum", "num_envs": 65536, "batch_size": 2048,
         "total_timesteps": 20_000_000},
        {"setting": "hopper", "num_envs": 4096, "batch_size": 2048,
         "total_timesteps": 20_000_000}]},
    ["brax", "mujoco", "mujoco-mjx", "jax", "jaxlib", "flax", "optax", "numpy"],
    "python3.11 -m venv ../brax-venv && ../brax-venv/bin/pip install -e '.[brax]' jax==0.10.2 "
    "jaxlib==0.10.2 (both sides run there), then --peer-python ../brax-venv/bin/python",
    # Brax's shipped inverted_pendulum run took 4.7 minutes on a quiet 2-core CPU, 10-20 busy
    purerl_in_peer_python=True, hung_after_s=3600, purerl_sides=("purerl", "purerl-eval"),
    compared_with={"brax": ("purerl-eval", "purerl")},  # brax-lean against purerl alone
    row_sides={"gpu": (("purerl",), ("brax-lean",))}, accelerator_rows=("gpu",))}


def settings_of(spec: dict) -> dict:
    """A program's BRAX_SETTINGS entry, overridden; a cut budget keeps <= 1 eval per update."""
    setting = dict(BRAX_SETTINGS[spec["setting"]])
    setting.update({k: int(spec[k]) for k in ("num_envs", "batch_size") if spec.get(k)})
    if spec.get("num_epochs"):
        setting["num_updates_per_batch"] = int(spec["num_epochs"])
    if spec.get("total_timesteps"):
        setting["num_timesteps"] = int(spec["total_timesteps"])
        updates = max(1, setting["num_timesteps"] // update_steps(setting))
        setting["num_evals"] = min(setting["num_evals"], 1 + updates)
    return setting


def update_steps(s: dict) -> int:
    """Env steps of one Brax update: `batch_size x num_minibatches` sequences of `unroll_length`."""
    return s["batch_size"] * s["num_minibatches"] * s["unroll_length"] * s["action_repeat"]


def brax_schedule(setting: dict, num_evals: int) -> tuple[int, int, int]:
    """`(stretches between evaluations, updates in each, env steps)` of `ppo.train`."""
    stretches, update = max(num_evals - 1, 1), update_steps(setting)
    updates = -(-setting["num_timesteps"] // (stretches * update))
    return stretches, updates, stretches * updates * update


def purerl_num_steps(s: dict) -> int:
    """purerl's `ppo.num_steps` for Brax's update (`num_envs` run all its sequences)."""
    sequences = s["batch_size"] * s["num_minibatches"]
    if sequences % s["num_envs"]:
        raise ValueError(f"batch_size x num_minibatches = {sequences} is not a multiple of "
                         f"num_envs = {s['num_envs']}, as Brax's ppo.train requires")
    return sequences // s["num_envs"] * s["unroll_length"]


def timed_call(points: list, called: float, compile_s: float, launched: float) -> dict:
    """A call's timings, from its start and compile seconds, and its curve, from its points."""
    call_s = time.time() - called
    steps, returns, times = (list(column) for column in zip(*points)) if points else ([],) * 3
    return {"compile_s": round(compile_s, 3), "train_s": round(call_s - compile_s, 3),
            "before_train_s": round(called - launched + compile_s, 3),
            "steps": steps, "returns": returns, "times": times}


def brax_run(spec: dict, lean: bool, launched: float) -> dict:
    """Brax's `ppo.train` as shipped or lean, its compile JAX's compile events in the call."""
    from jax._src import api  # brax 0.14.2 calls jax.device_put_replicated, which jax 0.10 hid
    jax.device_put_replicated = getattr(jax, "device_put_replicated", api.device_put_replicated)
    from brax import envs
    from brax.training.agents.ppo import networks, train as ppo

    found = {k: p.default for f in (ppo.train, networks.make_ppo_networks)
             for k, p in inspect.signature(f).parameters.items()}
    if differ := {k: found.get(k) for k, v in BRAX_DEFAULTS.items() if found.get(k) != v}:
        raise SystemExit(f"peer_brax.py: this brax's ppo.train defaults differ from those "
                         f"purerl's side matches (measured at brax 0.14.2): {differ}")
    setting = settings_of(spec)
    name, backend = setting.pop("env"), setting.pop("backend")
    if lean:
        setting.update(num_evals=0, run_evals=False, log_training_metrics=True)
    num_evals, key = setting["num_evals"], "episode/sum_reward" if lean else "eval/episode_reward"
    points, last = [], {}

    def progress(step, metrics):
        last.update(metrics)
        points.append((int(step), float(metrics.get(key, float("nan"))), time.time()))

    jax.monitoring.register_event_duration_secs_listener(clock := harness.CompileClock())
    environment = envs.get_environment(name, backend=backend)
    called = time.time()
    ppo.train(environment=environment, seed=0, progress_fn=progress, **setting)
    return {"lower_s": round(clock.seconds(harness.LOWERING_EVENTS), 3),
            **timed_call(points, called, clock.seconds(), launched),
            **{f"brax_{n}_walltime_s": round(float(last[f"{n}/walltime"]), 3)
               if f"{n}/walltime" in last else None for n in ("training", "eval")},
            "env_steps": brax_schedule(setting, num_evals)[2],
            "evaluations": 0 if lean else (num_evals > 1) + max(num_evals - 1, 1)}


def purerl_config(spec: dict, env_steps: int):
    """purerl's `Config` matching a Brax program at `env_steps`: as Brax's, no value clip, no
    gradient clipping (1e10: it must be > 0) and 1000-step episodes (purerl's Brax adapter's)."""
    from purerl.config import Config, EnvConfig, PPOConfig

    s = settings_of(spec)
    return Config(
        total_timesteps=env_steps, num_seeds=1,
        env=EnvConfig(name=f"brax/{s['env']}", backend=s["backend"], num_envs=s["num_envs"],
                      normalize_obs=s["normalize_observations"], clip_obs=1e6),
        ppo=PPOConfig(num_steps=purerl_num_steps(s), num_epochs=s["num_updates_per_batch"],
                      num_minibatches=s["num_minibatches"], lr=s["learning_rate"], anneal_lr=False,
                      gamma=s["discounting"], gae_lambda=BRAX_DEFAULTS["gae_lambda"],
                      clip_eps=BRAX_DEFAULTS["clipping_epsilon"], clip_value=False,
                      ent_coef=s["entropy_cost"], vf_coef=BRAX_DEFAULTS["vf_loss_coefficient"],
                      max_grad_norm=1e10))


class BraxTowers(nn.Module):
    """Brax's policy and value MLPs: the Gaussian's mean (purerl learns its log-std), the value."""

    num_outputs: int

    @nn.compact
    def __call__(self, obs):
        def mlp(*hidden, out):
            x = obs
            for size in hidden:
                x = BRAX_DEFAULTS["activation"](nn.Dense(size, kernel_init=LECUN)(x))
            return nn.Dense(out, kernel_init=LECUN)(x)

        return (mlp(*BRAX_DEFAULTS["policy_hidden_layer_sizes"], out=self.num_outputs),
                mlp(*BRAX_DEFAULTS["value_hidden_layer_sizes"], out=1)[:, 0])


def brax_towers(obs_shape, action_spec, network_config) -> BraxTowers:  # purerl's network factory
    return BraxTowers(action_spec.num_outputs)


def purerl_run(spec: dict, evals: bool, launched: float) -> dict:
    """purerl with Brax's networks: lean, `make_train` at brax-lean's budget; with `evals`,
    `purerl.run` at brax's, evaluating 128 sampled episodes where Brax does."""
    import purerl

    setting = settings_of(spec)
    _, updates, env_steps = brax_schedule(setting, setting["num_evals"] if evals else 0)
    config = purerl_config(spec, env_steps)
    if not evals:
        return {**harness.purerl_side(config, {"network": brax_towers}, launched),
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
        summary = purerl.run(config, run_dir, [EvaluationClock()], network=brax_towers)
    return {"lower_s": None, **timed_call(points, called, summary["compile_s"], launched),
            "env_steps": env_steps, "evaluations": len(points), "purerl": purerl.__file__}


def measure(spec: dict, side: str, launched: float) -> dict:
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    run = (purerl_run(spec, side == "purerl-eval", launched) if side.startswith("purerl")
           else brax_run(spec, side == "brax-lean", launched))
    return harness.side_result(spec, side, f"brax/{BRAX_SETTINGS[spec['setting']]['env']}", run,
                               kind=CURVES[side], startup_s=startup_s, launched=launched)


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], tuple(CURVES), measure)
