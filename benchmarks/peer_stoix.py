"""Stoix's Anakin PPO (`ff_ppo`, EdanToledo/Stoix at 8fff19c) on gymnax CartPole-v1, as shipped
or lean, or purerl matching it, for `peers.py --peer stoix`: `PYTHON peer_stoix.py SIDE PROGRAM
OUT`, under Stoix's venv (jax 0.5.3), where purerl is not installed.

A program is `{"setting"}` (`"total_timesteps"` cuts the budget, `"num_epochs"` sets the epochs):
cartpole is `default_ff_ppo.yaml` (1,024 envs x 128 steps, 4 epochs x 16 minibatches, lr 3e-4
decayed, 256x256 relu, 1e7 steps asked for in 20 learner calls: 60 of its 76 updates run);
cartpole-64tanh has 64x64 tanh towers; cartpole-purejaxrl PureJaxRL's sizes (4 envs, 4
minibatches, lr 2.5e-4, 5e5 steps). Sides: stoix runs `ff_ppo.py` as shipped, evaluating between
calls (its curve each call's training return; its compile JAX's compile events in the calls);
stoix-lean its learner in one call, without evaluation, logging or checkpointing; purerl
`make_train` at the same sizes, updates, lr decay (linear to Stoix's last value), coefficients,
grad clip and network. Different: Stoix clips each tower's gradient apart, standardizes
advantages per batch (purerl per minibatch), ends an episode at its time limit (purerl
bootstraps), draws threefry keys from seed 42 and does one more value pass per env step."""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports, which a user waits for too

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import harness  # noqa: E402  (this file's folder is first on sys.path)

ENV = "CartPole-v1"
# ff_ppo's defaults (default_ff_ppo.yaml and the files it names) and each one's Hydra keys
DEFAULTS = {"total_num_envs": 1024, "rollout_length": 128, "epochs": 4, "num_minibatches": 16,
            "lr": 3e-4, "total_timesteps": 10_000_000, "num_evaluation": 20,
            "layer_sizes": [256, 256], "activation": "relu", "gamma": 0.99, "gae_lambda": 0.95,
            "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5}
KEYS = {"lr": ["system.actor_lr", "system.critic_lr"],
        **{name: [f"arch.{name}"] for name in ("total_num_envs", "total_timesteps",
                                               "num_evaluation")},
        **{name: [f"system.{name}"] for name in ("rollout_length", "epochs", "num_minibatches")},
        **{name: [f"network.{tower}_network.pre_torso.{name}" for tower in ("actor", "critic")]
           for name in ("layer_sizes", "activation")}}
TANH_64 = {"layer_sizes": [64, 64], "activation": "tanh"}
STOIX_SETTINGS = {"cartpole": DEFAULTS, "cartpole-64tanh": {**DEFAULTS, **TANH_64},
                  "cartpole-purejaxrl": {**DEFAULTS, **TANH_64, "total_num_envs": 4,
                                         "num_minibatches": 4, "lr": 2.5e-4,
                                         "total_timesteps": 500_000}}
UPDATES = "each update's mean return of the episodes that ended in it"
CURVES = {"purerl": UPDATES, "stoix-lean": UPDATES, "stoix": "each learner call's mean return "
          "of the training episodes that ended in it, Stoix's ACTOR log"}
PEERS = {"stoix": harness.Peer(
    "peer_stoix.py", ("stoix", "stoix-lean"), {row: [{"setting": row}] for row in STOIX_SETTINGS},
    ["stoix", "stoa-env", "jax", "jaxlib", "flax", "optax", "chex", "distrax", "gymnax",
     "hydra-core", "numpy"],
    "git clone https://github.com/EdanToledo/Stoix ../stoix, python3.11 -m venv ../stoix-venv, "
    "install what benchmarks/README.md's Stoix section lists (Stoix pins jax<0.6), then "
    "--peer-python ../stoix-venv/bin/python")}
LOGGED = []  # what Stoix logs through CurveLogger, a dict per event


def settings_of(spec: dict) -> dict:
    """A program's settings; a cut budget keeps one update, and no more evaluations than
    updates (Stoix asserts it)."""
    setting = json.loads(json.dumps(STOIX_SETTINGS[spec["setting"]]))  # a deep copy
    if spec.get("total_timesteps"):
        batch = setting["total_num_envs"] * setting["rollout_length"]
        total = setting["total_timesteps"] = max(int(spec["total_timesteps"]), batch)
        setting["num_evaluation"] = min(setting["num_evaluation"], total // batch)
    setting["epochs"] = int(spec.get("num_epochs") or setting["epochs"])
    return setting


def stoix_schedule(setting: dict) -> tuple[int, int, int]:
    """Stoix's split of a budget on one device: `(updates asked for, per call, run)`."""
    updates = setting["total_timesteps"] // (setting["total_num_envs"] * setting["rollout_length"])
    per_call = updates // setting["num_evaluation"]
    return updates, per_call, per_call * setting["num_evaluation"]


def overrides(setting: dict) -> list[str]:
    """Stoix's Hydra overrides of the settings that differ from its defaults."""
    return [f"{key}={str(setting[name]).replace(' ', '')}" for name, keys in KEYS.items()
            if setting[name] != DEFAULTS[name] for key in keys]


def covered(spans, start: float, end: float) -> float:
    """Seconds of `[start, end]` that the union of `spans`, `[(begin, finish)]`, covers."""
    total, reach = 0.0, start
    for begin, finish in sorted(spans):
        begin, finish = max(begin, reach), min(finish, end)
        if finish > begin:
            total, reach = total + (finish - begin), finish
    return total


def stoix_root() -> Path:
    try:
        import stoix
    except ImportError:
        sys.exit("peer_stoix.py: this Python cannot import stoix; install it as benchmarks/"
                 "README.md's Stoix section says")
    return Path(stoix.__file__).resolve().parents[1]


class CurveLogger:
    """A logger of Stoix's (in its `logger.loggers`): each event's step, wall clock, mean
    episode return and steps/s into LOGGED."""

    def __init__(self, **_):
        self.log_config = self.stop = lambda *_: None

    def log_dict(self, data: dict, step: int, eval_step: int, event) -> None:
        returns, sps = data.get("episode_return", {}), data.get("steps_per_second")
        LOGGED.append({"event": event.value, "step": int(step), "time": time.time(),
                       "return": float(returns["mean"]) if "mean" in returns else None,
                       "sps": None if sps is None else float(sps)})


def run_stoix(spec: dict, launched: float) -> dict:
    """`ff_ppo.py` as shipped, in this process: its timings from its logs and JAX's compile
    events, its curve, and its evaluations' curve."""
    import runpy
    import tempfile

    import jax

    setting, root, clock = settings_of(spec), stoix_root(), harness.CompileClock()
    jax.monitoring.register_event_duration_secs_listener(clock)
    sys.modules["peer_stoix"] = sys.modules[__name__]  # where Hydra finds CurveLogger
    script = root / "stoix/systems/ppo/anakin/ff_ppo.py"
    with tempfile.TemporaryDirectory(prefix="purerl_peers_stoix_") as run_dir:
        sys.argv = [str(script), *overrides(setting), f"hydra.run.dir={run_dir}",
                    f"logger.base_exp_path={run_dir}/results",
                    "+logger.loggers.curve={_target_:peer_stoix.CurveLogger}"]
        os.chdir(root)  # Stoix's config search path is relative to it
        runpy.run_path(str(script), run_name="__main__")
    _, per_call, ran = stoix_schedule(setting)
    calls, actor, trainer, evals = ([e for e in LOGGED if e["event"] == kind]
                                    for kind in ("misc", "actor", "trainer", "evaluator"))
    returns = {e["step"]: e["return"] for e in actor}
    # each call's seconds from its trainer steps/s; `calls` (misc) is logged first at each
    seconds = [per_call * setting["epochs"] * setting["num_minibatches"] / e["sps"]
               for e in trainer]
    first_start = calls[0]["time"] - seconds[0]
    spans = [(end - duration, end) for _, duration, end in clock.spans]
    compiles = [covered(spans, e["time"] - s, e["time"]) for e, s in zip(calls, seconds)]
    return {"compile_s": round(sum(compiles), 3), "train_s": round(sum(seconds) - sum(compiles), 3),
            "before_train_s": round(first_start - launched + compiles[0], 3),
            "between_calls_s": round(calls[-1]["time"] - first_start - sum(seconds), 3),
            "env_steps": ran * setting["total_num_envs"] * setting["rollout_length"],
            "steps": [e["step"] for e in calls], "times": [e["time"] for e in calls],
            "returns": [returns.get(e["step"], float("nan")) for e in calls],
            "eval_curve": {"kind": "Stoix's evaluation: the mean return of 128 episodes of the "
                                   "stochastic policy after each learner call",
                           "steps": [e["step"] for e in evals],
                           "returns": harness.rounded(e["return"] for e in evals)}}


def lean_program(spec: dict):
    """Stoix's learner, its calls made one: `(learn, state, env steps, curve)`; `curve(output)`
    gives each update's mean return (NaN where none ended)."""
    import types

    import jax
    import numpy as np

    def unused(*_, **__):
        raise RuntimeError("peer_stoix.py: the stoix-lean side has no logger or checkpointer")

    # ff_ppo.py's logger and checkpointer, which the learner never uses, stand empty (so that
    # wandb, neptune and orbax are not imported)
    for module, names in (("stoix.utils.logger", ("LogEvent", "StoixLogger")),
                          ("stoix.utils.checkpointing", ("Checkpointer",))):
        sys.modules[module] = types.ModuleType(module)
        vars(sys.modules[module]).update(dict.fromkeys(names, unused))
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from stoix.systems.ppo.anakin import ff_ppo
    from stoix.utils import make_env
    from stoix.utils.total_timestep_checker import check_total_timesteps

    setting, root = settings_of(spec), stoix_root()
    os.chdir(root)  # Stoix's config search path (`file://stoix/configs`) is relative
    with initialize_config_dir(str(root / "stoix/configs/default/anakin"), version_base="1.2"):
        config = compose("default_ff_ppo", overrides=overrides(setting))
    OmegaConf.set_struct(config, False)
    config.num_devices = len(jax.devices())
    config = check_total_timesteps(config)
    config.arch.num_updates_per_eval *= config.arch.num_evaluation  # all calls as one
    env, _ = make_env.make(config=config)
    key, _, actor_key, critic_key = jax.random.split(jax.random.PRNGKey(config.arch.seed), 4)
    learn, _, state = ff_ppo.learner_setup(env, (key, actor_key, critic_key), config)
    ran, batch = stoix_schedule(setting)[2], setting["total_num_envs"] * setting["rollout_length"]

    def curve(output):
        info = output.episode_metrics  # each [devices, updates, batch, steps, envs]
        ended = np.moveaxis(np.asarray(info["is_terminal_step"]), 1, 0).reshape(ran, -1)
        returns = np.moveaxis(np.asarray(info["episode_return"], np.float64), 1, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (returns.reshape(ran, -1) * ended).sum(1) / ended.sum(1)
        return [batch * k for k in range(1, ran + 1)], means.tolist()

    return learn, state, ran * batch, curve


def purerl_config(spec: dict):
    """purerl's `Config` matching a program, at the updates Stoix runs."""
    import purerl.config as pc

    setting = settings_of(spec)
    updates, _, ran = stoix_schedule(setting)
    lr = pc.SchedulesConfig(lr=pc.ScheduleConfig(kind="linear", end=1.0 - ran / updates))
    return pc.Config(
        total_timesteps=ran * setting["total_num_envs"] * setting["rollout_length"],
        env=pc.EnvConfig(name=ENV, num_envs=setting["total_num_envs"]),
        ppo=pc.PPOConfig(num_steps=setting["rollout_length"], num_epochs=setting["epochs"],
                         num_minibatches=setting["num_minibatches"], anneal_lr=False,
                         clip_value=True, schedule=lr,
                         **{name: setting[name] for name in ("lr", "gamma", "gae_lambda",
                                                             "clip_eps", "ent_coef", "vf_coef",
                                                             "max_grad_norm")}),
        network=pc.NetworkConfig(hidden_sizes=setting["layer_sizes"],
                                 activation=setting["activation"]))


def measure(spec: dict, side: str, launched: float) -> dict:
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    if side == "purerl":
        run = harness.purerl_side(purerl_config(spec), launched=launched)
    elif side == "stoix":
        run = run_stoix(spec, launched)
    else:  # the learner's one call, its compile timed apart
        run = harness.program_side(*lean_program(spec), launched, jit=False)
    if side != "purerl":
        run["stoix_commit"] = subprocess.run(["git", "-C", str(stoix_root()), "rev-parse", "HEAD"],
                                             capture_output=True, text=True).stdout.strip() or None
    return harness.side_result(spec, side, ENV, run, kind=CURVES[side], startup_s=startup_s,
                               launched=launched)


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], tuple(CURVES), measure, STARTED)
