"""Stoix's Anakin PPO (`ff_ppo` at 8fff19c) on gymnax CartPole-v1, as shipped or lean, or purerl
matching it, for `peers.py --peer stoix`: `PYTHON peer_stoix.py SIDE PROGRAM OUT` under Stoix's
venv (jax 0.5.3), without purerl. A program is `{"setting"}`; `"total_timesteps"` cuts its budget,
`"num_epochs"` sets its epochs (benchmarks/README.md: the settings, sides and what differs)."""

import os
import runpy
import sys
import tempfile
import time
import types
from pathlib import Path

import harness  # before jax: its import stamps the start (this folder is first on sys.path)
import jax
import numpy as np

ENV = "CartPole-v1"
# ff_ppo's defaults (default_ff_ppo.yaml and the files it names), then each one's Hydra keys
DEFAULTS = {"total_num_envs": 1024, "rollout_length": 128, "epochs": 4, "num_minibatches": 16,
            "lr": 3e-4, "total_timesteps": 10_000_000, "num_evaluation": 20,
            "layer_sizes": [256, 256], "activation": "relu", "gamma": 0.99, "gae_lambda": 0.95,
            "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5}
KEYS = {"lr": ["system.actor_lr", "system.critic_lr"],
        **{n: [f"arch.{n}"] for n in ("total_num_envs", "total_timesteps", "num_evaluation")},
        **{n: [f"system.{n}"] for n in ("rollout_length", "epochs", "num_minibatches")},
        **{n: [f"network.{tower}_network.pre_torso.{n}" for tower in ("actor", "critic")]
           for n in ("layer_sizes", "activation")}}
TANH_64 = {**DEFAULTS, "layer_sizes": [64, 64], "activation": "tanh"}
STOIX_SETTINGS = {"cartpole": DEFAULTS, "cartpole-64tanh": TANH_64,
                  "cartpole-purejaxrl": {**TANH_64, "total_num_envs": 4, "num_minibatches": 4,
                                         "lr": 2.5e-4, "total_timesteps": 500_000}}
UPDATES = "each update's mean return of the episodes that ended in it"
CURVES = {"purerl": UPDATES, "stoix-lean": UPDATES, "stoix": "each learner call's mean return "
          "of the training episodes that ended in it, Stoix's ACTOR log"}
PEERS = {"stoix": harness.Peer(
    "peer_stoix.py", ("stoix", "stoix-lean"), {row: [{"setting": row}] for row in STOIX_SETTINGS},
    ["stoix", "stoa-env", "jax", "jaxlib", "flax", "optax", "chex", "distrax", "gymnax",
     "hydra-core", "numpy"],
    "git clone https://github.com/EdanToledo/Stoix ../stoix and make ../stoix-venv as benchmarks/"
    "README.md says (Stoix pins jax<0.6), then --peer-python ../stoix-venv/bin/python")}
LOGGED = {}  # what Stoix logs through CurveLogger: {event: [its metrics, step and time]}


def settings_of(spec: dict) -> dict:
    """A program's settings; a cut budget keeps one update and no more evaluations than updates."""
    setting = dict(STOIX_SETTINGS[spec["setting"]])
    setting["epochs"] = int(spec.get("num_epochs") or setting["epochs"])
    if spec.get("total_timesteps"):
        batch = setting["total_num_envs"] * setting["rollout_length"]
        total = setting["total_timesteps"] = max(int(spec["total_timesteps"]), batch)
        setting["num_evaluation"] = min(setting["num_evaluation"], total // batch)
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


class CurveLogger:
    """A logger of Stoix's (in `logger.loggers`): each event's metrics, step and time."""

    def __init__(self, **_):
        self.log_config = self.stop = lambda *_: None

    def log_dict(self, data: dict, step: int, eval_step: int, event) -> None:
        LOGGED.setdefault(event.value, []).append({**data, "step": int(step), "time": time.time()})


def run_stoix(setting: dict, root: Path, launched: float) -> dict:
    """`ff_ppo.py` as shipped, in this process, its timings read off its logs and JAX's."""
    jax.monitoring.register_event_duration_secs_listener(clock := harness.CompileClock())
    sys.modules["peer_stoix"] = sys.modules[__name__]  # where Hydra finds CurveLogger
    with tempfile.TemporaryDirectory(prefix="purerl_peers_stoix_") as run_dir:
        sys.argv = [str(root / "stoix/systems/ppo/anakin/ff_ppo.py"), *overrides(setting),
                    f"hydra.run.dir={run_dir}", f"logger.base_exp_path={run_dir}/results",
                    "+logger.loggers.curve={_target_:peer_stoix.CurveLogger}"]
        runpy.run_path(sys.argv[0], run_name="__main__")
    _, per_call, ran = stoix_schedule(setting)
    calls, trainer, evals = (LOGGED[event] for event in ("misc", "trainer", "evaluator"))
    returns = {e["step"]: float(e["episode_return"]["mean"]) for e in LOGGED.get("actor", [])}
    # each call's seconds from its trainer steps/s; its misc event, logged first, stamps its end
    seconds = [per_call * setting["epochs"] * setting["num_minibatches"]
               / float(e["steps_per_second"]) for e in trainer]
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
                           "returns": harness.rounded(float(e["episode_return"]["mean"])
                                                      for e in evals)}}


def run_lean(setting: dict, root: Path, launched: float) -> dict:
    """Stoix's learner, its calls made one, compiled and run by `harness.program_side`."""
    # ff_ppo.py's logger and checkpointer, unused by its learner, stand empty (no wandb or orbax)
    empty = types.SimpleNamespace(LogEvent=None, StoixLogger=None, Checkpointer=None)
    sys.modules.update({"stoix.utils.logger": empty, "stoix.utils.checkpointing": empty})
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from stoix.systems.ppo.anakin import ff_ppo

    with initialize_config_dir(str(root / "stoix/configs/default/anakin"), version_base="1.2"):
        config = compose("default_ff_ppo", overrides=overrides(setting))
    OmegaConf.set_struct(config, False)  # then ff_ppo.run_experiment's learner, calls made one
    config.num_devices = len(jax.devices())
    config = ff_ppo.check_total_timesteps(config)
    config.arch.num_updates_per_eval *= config.arch.num_evaluation
    key, _, actor_key, critic_key = jax.random.split(jax.random.PRNGKey(config.arch.seed), 4)
    learn, _, state = ff_ppo.learner_setup(ff_ppo.environments.make(config=config)[0],
                                           (key, actor_key, critic_key), config)
    ran, batch = stoix_schedule(setting)[2], setting["total_num_envs"] * setting["rollout_length"]

    def curve(output):  # each metric [devices, updates, batch, steps, envs]
        ended, returns = (np.moveaxis(np.asarray(output.episode_metrics[name], np.float64), 1, 0)
                          .reshape(ran, -1) for name in ("is_terminal_step", "episode_return"))
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (returns * ended).sum(1) / ended.sum(1)
        return [batch * k for k in range(1, ran + 1)], means.tolist()

    return harness.program_side(learn, state, ran * batch, curve, launched, jit=False)


def purerl_config(spec: dict):
    """purerl's `Config` matching a program at the updates Stoix runs, lr decayed as Stoix's."""
    import purerl.config as pc

    s = settings_of(spec)
    updates, _, ran = stoix_schedule(s)
    lr = pc.SchedulesConfig(lr=pc.ScheduleConfig(kind="linear", end=1.0 - ran / updates))
    same = ("lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm")
    return pc.Config(
        total_timesteps=ran * s["total_num_envs"] * s["rollout_length"],
        env=pc.EnvConfig(name=ENV, num_envs=s["total_num_envs"]),
        ppo=pc.PPOConfig(num_steps=s["rollout_length"], num_epochs=s["epochs"],
                         num_minibatches=s["num_minibatches"], anneal_lr=False, clip_value=True,
                         schedule=lr, **{name: s[name] for name in same}),
        network=pc.NetworkConfig(hidden_sizes=s["layer_sizes"], activation=s["activation"]))


def measure(spec: dict, side: str, launched: float) -> dict:
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    if side == "purerl":
        run = harness.purerl_side(purerl_config(spec), launched=launched)
    else:
        try:
            import stoix
        except ImportError:
            sys.exit("peer_stoix.py: this Python cannot import stoix (benchmarks/README.md: Stoix)")
        os.chdir(root := Path(stoix.__file__).resolve().parents[1])  # its configs' path is relative
        run = (run_stoix if side == "stoix" else run_lean)(settings_of(spec), root, launched)
        run["stoix_commit"] = harness.git_state(root)["commit"]
    return harness.side_result(spec, side, ENV, run, kind=CURVES[side], startup_s=startup_s,
                               launched=launched)


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], tuple(CURVES), measure)
