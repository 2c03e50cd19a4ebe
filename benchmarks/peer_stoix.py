"""Trains Stoix's Anakin PPO (`ff_ppo`) on gymnax CartPole-v1, as shipped or lean, or purerl
configured to match, for `peers.py --peer stoix`; one run per process, so that its start-up
and peak memory are its own.

    STOIX_PYTHON benchmarks/peer_stoix.py stoix '{"setting": "cartpole"}' OUT
    STOIX_PYTHON benchmarks/peer_stoix.py stoix-lean '{"setting": "cartpole-64tanh"}' OUT
    python benchmarks/peer_stoix.py purerl '{"setting": "cartpole-purejaxrl"}' OUT

Stoix (a GitHub checkout of EdanToledo/Stoix, measured at 8fff19c, installed into its venv
with `pip install --no-deps -e`) runs under its venv's Python, where purerl is not installed:
this file imports nothing of purerl or Stoix at its top. Stoix pins `jax>=0.4.25,<0.6.0`
(its uv.lock: jax 0.5.3, flax 0.10.5), so its sides run on jax 0.5.3 and purerl's on 0.10.2:
not the same XLA. Its gymnax (0.0.9, as its lock's) has the five-value step. A program is
`{"setting"}` (and `"total_timesteps"` to cut the budget for a check, `"num_epochs"` to change
the epochs); the settings are
Stoix's `configs/default/anakin/default_ff_ppo.yaml` (arch `anakin`, system `ppo/ff_ppo`,
network `mlp`, env `gymnax/cartpole`) and two of its variations:

- cartpole: Stoix's defaults: 1,024 envs x 128 steps, 4 epochs x 16 minibatches (of 8,192),
  actor and critic lr 3e-4, decayed, two 256x256 relu towers, gamma 0.99, gae_lambda 0.95,
  clip 0.2 (ratio and value), entropy 0.01, value coefficient 0.5, grad clip 0.5, advantages
  standardized, 1e7 steps asked for, 20 evaluations. The longest row: its 7.9M steps through
  256-wide towers take some 4-8 minutes per side on this 2-core CPU (estimated from a check
  of 655,360 steps, about 40 CPU-seconds of training on either side); its budget is Stoix's
  own, not cut.
- cartpole-64tanh: the same with both towers 64x64 tanh (PureJaxRL's and purerl's network):
  Stoix's 256x256 towers do about 15x the multiply-adds of 64x64 ones per pass.
- cartpole-purejaxrl: PureJaxRL's CartPole sizes (`peer_driver.PUREJAXRL_CONFIG`): 4 envs x
  128 steps, 4 epochs x 4 minibatches, 64x64 tanh, lr 2.5e-4 decayed, 5e5 steps asked for.

Stoix splits a budget as `stoix_schedule` says: `total_timesteps // (envs x steps)` updates
(76 for cartpole), of which it runs `num_evaluation` (20) chunks of `updates // 20` (3): 60
updates, 7,864,320 steps (cartpole-purejaxrl: 960 of 976 updates, 491,520 steps); its lr
decays linearly by update toward 0 at the 76th (976th), so it ends at 21% (1.6%) of its start.
A cut budget keeps at least one update and at most as many evaluations as updates. Stoix's
`pmap` over devices runs as shipped, over the one CPU device here (`update_batch_size` 1). The
sides:

- stoix: as shipped: Stoix's own command, `python stoix/systems/ppo/anakin/ff_ppo.py` with
  the setting's overrides (none for cartpole), run in this process (`runpy`, as `__main__`)
  from the checkout's root (its config search path is relative to it), Hydra's output and
  Stoix's results in a temporary folder. Its host loop calls the pmapped learner
  20 times and after each one logs the training episodes' returns and evaluates: 128 episodes
  of the stochastic policy to their end (up to 64,000 env steps of inference, on CartPole's
  500-step limit), and at the end 1,280 more (its "absolute metric"), all outside the
  training calls. Its curve is each call's mean return of the training episodes that ended in
  it, as its console shows (`ACTOR`), read through a logger of this file added to Stoix's
  `logger.loggers` (its way of adding one), which takes the wall clock at each call's log; its
  evaluation's curve is kept beside it. Compile is the union of JAX's own compile events'
  spans (trace, lowering, backend compile) inside the training calls (the first, on jax 0.5.3;
  on jax 0.10.2 the second compiles again); training is the calls' time, as Stoix times them,
  less that compile; the time before training counts the first call's compile.
- stoix-lean: at its fastest: the same learner (`ff_ppo.learner_setup`, the same config
  composed through Hydra's compose API, the same env and keys), its 20 calls made one call of
  all 60 updates (the same lr schedule), without evaluation, logging or checkpointing, and
  without importing what only those need: Stoix's logger module (which imports wandb,
  neptune and tensorboard_logger) and checkpointing module (orbax) stand in `sys.modules` as
  empty modules. Stoix has no compile cache of its own (JAX's persistent one is off on every
  side). Lowered and compiled apart, then run once; its curve is each update's mean return of
  the episodes that ended in it. It trains as the stoix side does (the same keys: the same
  final return in every check).
- purerl: `purerl.make_train` at the same env, envs, steps, epochs, minibatches, updates and
  env steps, lr and its decay (`ppo.schedule.lr` linear to Stoix's last value, `stoix_lr_end`),
  gamma, lambda, both clips, coefficients, grad clip, network sizes and activation; its curve
  is each update's mean return of the episodes that ended in it.

What stays different, and the work it changes: Stoix keeps an optimizer per tower, each
clipping its own gradient's global norm, purerl one over both towers; Stoix standardizes the
advantages over the whole batch once per update, purerl over each minibatch; Stoix's gymnax
(through Stoa's adapter) ends an episode at its time limit as at a failure, purerl bootstraps
the truncated step; gymnax 0.0.9's step resets inside too, before Stoa's auto-reset; Stoix
draws threefry keys (seed 42, its default), purerl `unsafe_rbg` (seed 0). Kernels are
orthogonal on both (gain sqrt 2, 0.01 for the policy's output, 1 for the value's), Adam's eps
1e-5 on both, and each side computes a policy pass per rollout step; Stoix two value passes
(the value of the next observation too), purerl one (after the rollout, over all its steps at
once: the next observation's value is the following step's, except at episode ends and each
env's last step), so Stoix does a value pass per env step more; Stoix as shipped adds its
evaluations between the training calls.

JSON to OUT as `peer_rejax.py` writes it: the timings, the curve, its final return (the mean
of the curve's last 5%), time to the return of `peer_curves.THRESHOLDS` from the process's
start (for stoix from the wall clock at each call's log, for the others from their steady
training rate) and the process's peak resident memory.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports, which a user waits for too

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import peer_curves as curves  # noqa: E402  (this file's folder is first on sys.path)
from harness import compile_and_run, purerl_curve, start_jax  # noqa: E402

SEED = 0  # purerl's; Stoix keeps its default `arch.seed`, 42
ENV = "CartPole-v1"
GET_IT = ("git clone https://github.com/EdanToledo/Stoix ../stoix and install it into its venv "
          "as benchmarks/README.md's Stoix section says")
# Stoix's ff_ppo defaults (EdanToledo/Stoix configs/default/anakin/default_ff_ppo.yaml and
# the arch/anakin, system/ppo/ff_ppo and network/mlp files it names), with the Hydra key of
# each setting this file can change.
STOIX_DEFAULTS = {
    "total_num_envs": 1024, "rollout_length": 128, "epochs": 4, "num_minibatches": 16,
    "lr": 3e-4, "total_timesteps": 10_000_000, "num_evaluation": 20,
    "layer_sizes": [256, 256], "activation": "relu", "gamma": 0.99, "gae_lambda": 0.95,
    "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5,
}
STOIX_KEYS = {
    "total_num_envs": ["arch.total_num_envs"], "total_timesteps": ["arch.total_timesteps"],
    "num_evaluation": ["arch.num_evaluation"], "rollout_length": ["system.rollout_length"],
    "epochs": ["system.epochs"], "num_minibatches": ["system.num_minibatches"],
    "lr": ["system.actor_lr", "system.critic_lr"],
    "layer_sizes": [f"network.{tower}_network.pre_torso.layer_sizes"
                    for tower in ("actor", "critic")],
    "activation": [f"network.{tower}_network.pre_torso.activation"
                   for tower in ("actor", "critic")],
}
STOIX_SETTINGS = {
    "cartpole": STOIX_DEFAULTS,
    "cartpole-64tanh": {**STOIX_DEFAULTS, "layer_sizes": [64, 64], "activation": "tanh"},
    "cartpole-purejaxrl": {**STOIX_DEFAULTS, "total_num_envs": 4, "num_minibatches": 4,
                           "lr": 2.5e-4, "total_timesteps": 500_000, "layer_sizes": [64, 64],
                           "activation": "tanh"},
}
SIDES = ("purerl", "stoix", "stoix-lean")
# What each side's curve is.
CURVES = {
    "purerl": "each update's mean return of the episodes that ended in it",
    "stoix": "each learner call's (of 20) mean return of the training episodes that ended in "
             "it, Stoix's ACTOR log",
    "stoix-lean": "each update's mean return of the episodes that ended in it",
}


def settings_of(spec: dict) -> dict:
    """Stoix's settings of a program.

    Args:
        spec: the program: `"setting"` names STOIX_SETTINGS' entry; `"total_timesteps"`, if
            there, cuts its budget, to at least one update, with at most as many evaluations
            as updates (Stoix asserts that); `"num_epochs"`, if there, replaces `epochs`.

    Returns:
        A copy of the settings.
    """
    setting = json.loads(json.dumps(STOIX_SETTINGS[spec["setting"]]))  # a deep copy
    if spec.get("total_timesteps"):
        batch = setting["total_num_envs"] * setting["rollout_length"]
        setting["total_timesteps"] = max(int(spec["total_timesteps"]), batch)
        setting["num_evaluation"] = min(setting["num_evaluation"],
                                        setting["total_timesteps"] // batch)
    if spec.get("num_epochs"):
        setting["epochs"] = int(spec["num_epochs"])
    return setting


def stoix_schedule(setting: dict) -> tuple[int, int, int]:
    """How Stoix's Anakin splits the budget (`total_timestep_checker.py`, one device, an
    update batch of one): `total // (envs x steps)` updates, run as `num_evaluation` learner
    calls of `updates // num_evaluation` updates each.

    Args:
        setting: Stoix's settings (`total_timesteps`, `total_num_envs`, `rollout_length`,
            `num_evaluation`).

    Returns:
        `(updates its lr decays over, updates per learner call, updates it runs)`.
    """
    updates = setting["total_timesteps"] // (setting["total_num_envs"]
                                             * setting["rollout_length"])
    per_call = updates // setting["num_evaluation"]
    return updates, per_call, per_call * setting["num_evaluation"]


def stoix_lr_end(setting: dict) -> float:
    """Stoix's lr at its run's end, as a share of its start: its schedule is `lr x (1 -
    update / updates)` (`make_learning_rate_schedule`), over the updates the budget asks for,
    of which it runs fewer; a linear schedule over the updates run to this share is the same.

    Args:
        setting: Stoix's settings.

    Returns:
        The share.
    """
    updates, _, ran = stoix_schedule(setting)
    return 1.0 - ran / updates


def overrides(setting: dict) -> list[str]:
    """Stoix's Hydra overrides for the settings that differ from its defaults.

    Args:
        setting: Stoix's settings.

    Returns:
        `["key=value", ...]`, as its command line takes them; [] at its defaults.
    """
    changed = []
    for name, keys in STOIX_KEYS.items():
        if setting[name] != STOIX_DEFAULTS[name]:
            value = setting[name]
            text = f"[{','.join(map(str, value))}]" if isinstance(value, list) else str(value)
            changed += [f"{key}={text}" for key in keys]
    return changed


def covered(spans, start: float, end: float) -> float:
    """Seconds of `[start, end]` that the union of `spans` covers (nested and overlapping
    spans counted once).

    Args:
        spans: `[(begin, finish)]`, seconds since the epoch.
        start: the window's start.
        end: its end.

    Returns:
        The seconds.
    """
    total, reach = 0.0, start
    for begin, finish in sorted(spans):
        begin, finish = max(begin, reach), min(finish, end)
        if finish > begin:
            total += finish - begin
            reach = finish
    return total


def stoix_commit(root: Path) -> str | None:
    """The commit of the Stoix checkout at `root` (None where git cannot tell)."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    return done.stdout.strip() or None


def stoix_root() -> Path:
    """The Stoix checkout this Python imports `stoix` from (installed with `pip install -e`);
    exits with one line saying how to get it when there is none."""
    try:
        import stoix
    except ImportError:
        sys.exit(f"peer_stoix.py: this Python cannot import stoix; {GET_IT}")
    return Path(stoix.__file__).resolve().parents[1]


# What Stoix logs through `CurveLogger` as the stoix side runs: one dict per event.
LOGGED = []


class CurveLogger:
    """A logger that Stoix instantiates from its `logger.loggers` config, beside its console:
    keeps each event's step, wall clock, mean episode return and Stoix's own steps/s."""

    def __init__(self, **_):
        pass

    def log_config(self, config) -> None:
        pass

    def log_dict(self, data: dict, step: int, eval_step: int, event) -> None:
        returns = data.get("episode_return", {})
        LOGGED.append({"event": event.value, "step": int(step), "time": time.time(),
                       "return": float(returns["mean"]) if "mean" in returns else None,
                       "sps": float(data["steps_per_second"])
                       if "steps_per_second" in data else None})

    def stop(self) -> None:
        pass


def run_stoix(spec: dict, launched: float) -> dict:
    """Stoix's own command for the setting, in this process.

    Args:
        spec: the program (and `"total_timesteps"`).
        launched: when this process was launched, seconds since the epoch.

    Returns:
        Its timings, env steps, curve (`steps`, `returns`, `times`: the wall clock at each
        learner call's log) and its evaluations' curve.
    """
    setting = settings_of(spec)
    root = stoix_root()
    spans = []

    def compiled(event, duration, **_):
        if event in curves.COMPILE_EVENTS:
            spans.append((time.time() - duration, time.time()))

    jax.monitoring.register_event_duration_secs_listener(compiled)
    # Hydra finds CurveLogger under this name; the script below runs as `__main__`.
    sys.modules["peer_stoix"] = sys.modules[__name__]
    script = root / "stoix/systems/ppo/anakin/ff_ppo.py"
    with tempfile.TemporaryDirectory(prefix="purerl_peers_stoix_") as run_dir:
        sys.argv = [str(script), *overrides(setting), f"hydra.run.dir={run_dir}",
                    f"logger.base_exp_path={run_dir}/results",
                    "+logger.loggers.curve={_target_:peer_stoix.CurveLogger}"]
        os.chdir(root)
        runpy.run_path(str(script), run_name="__main__")  # `python ff_ppo.py`, as shipped
    _, per_call, ran = stoix_schedule(setting)
    batch = setting["total_num_envs"] * setting["rollout_length"]
    calls = [e for e in LOGGED if e["event"] == "misc"]  # one per learner call, logged first
    returns = {e["step"]: e["return"] for e in LOGGED if e["event"] == "actor"}
    # Stoix's trainer steps/s: optimizer steps of a call over the call's time
    seconds = [per_call * setting["epochs"] * setting["num_minibatches"] / e["sps"]
               for e in LOGGED if e["event"] == "trainer"]
    first_start = calls[0]["time"] - seconds[0]
    # JAX's compiles inside each call (which Stoix's own timing of the call includes)
    compiles = [covered(spans, e["time"] - s, e["time"]) for e, s in zip(calls, seconds)]
    compile_s = sum(compiles)
    return {"compile_s": round(compile_s, 3), "train_s": round(sum(seconds) - compile_s, 3),
            "before_train_s": round(first_start - launched + compiles[0], 3),
            "between_calls_s": round(calls[-1]["time"] - first_start - sum(seconds), 3),
            "env_steps": ran * batch, "steps": [e["step"] for e in calls],
            "returns": [returns.get(e["step"], math.nan) for e in calls],
            "times": [e["time"] for e in calls],
            "eval_curve": {"kind": "Stoix's evaluation: the mean return of 128 episodes of the "
                                   "stochastic policy after each learner call",
                           "steps": [e["step"] for e in LOGGED if e["event"] == "evaluator"],
                           "returns": curves.rounded(e["return"] for e in LOGGED
                                                     if e["event"] == "evaluator")}}


def unused_modules() -> None:
    """Puts empty modules in `sys.modules` for Stoix's logger and checkpointing, which
    `ff_ppo.py` imports at its top and the learner never uses, so that the packages only they
    import (wandb, neptune, tensorboard_logger, orbax) are not imported; each name `ff_ppo.py`
    takes from them is a placeholder that fails if called."""
    def unused(*_, **__):
        raise RuntimeError("peer_stoix.py: the stoix-lean side has no logger or checkpointer")

    for module, names in (("stoix.utils.logger", ("LogEvent", "StoixLogger")),
                          ("stoix.utils.checkpointing", ("Checkpointer",))):
        stub = types.ModuleType(module)
        for name in names:
            setattr(stub, name, unused)
        sys.modules[module] = stub


def lean_program(spec: dict):
    """Stoix's learner at a program's setting, the whole run in one call.

    Args:
        spec: the program (and `"total_timesteps"`).

    Returns:
        `(learn, learner state, env steps, curve)`: `learn` is Stoix's pmapped learner;
        `curve(output)` gives the env steps and the mean return of the episodes that ended in
        each update (NaN where none did).
    """
    setting = settings_of(spec)
    root = stoix_root()
    unused_modules()
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from stoix.systems.ppo.anakin import ff_ppo
    from stoix.utils import make_env as environments
    from stoix.utils.total_timestep_checker import check_total_timesteps

    os.chdir(root)  # Stoix's config search path (`file://stoix/configs`) is relative
    with initialize_config_dir(str(root / "stoix/configs/default/anakin"), version_base="1.2"):
        config = compose("default_ff_ppo", overrides=overrides(setting))
    OmegaConf.set_struct(config, False)
    config.num_devices = len(jax.devices())
    config = check_total_timesteps(config)
    config.arch.num_updates_per_eval *= config.arch.num_evaluation  # all calls as one
    env, _ = environments.make(config=config)
    key, _, actor_key, critic_key = jax.random.split(jax.random.PRNGKey(config.arch.seed), 4)
    learn, _, state = ff_ppo.learner_setup(env, (key, actor_key, critic_key), config)
    _, _, ran = stoix_schedule(setting)
    batch = setting["total_num_envs"] * setting["rollout_length"]

    def curve(output):
        info = output.episode_metrics  # each [devices, updates, batch, steps, envs]
        ended = np.moveaxis(np.asarray(info["is_terminal_step"]), 1, 0).reshape(ran, -1)
        returns = np.moveaxis(np.asarray(info["episode_return"], np.float64), 1, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (returns.reshape(ran, -1) * ended).sum(1) / ended.sum(1)
        return [batch * k for k in range(1, ran + 1)], means.tolist()

    return learn, state, ran * batch, curve


def purerl_config(spec: dict):
    """purerl's settings matching a Stoix program's.

    Args:
        spec: the program (and `"total_timesteps"`).

    Returns:
        The `purerl.config.Config`, at the updates Stoix runs.
    """
    from purerl.config import (
        Config,
        EnvConfig,
        NetworkConfig,
        PPOConfig,
        ScheduleConfig,
        SchedulesConfig,
    )

    setting = settings_of(spec)
    _, _, ran = stoix_schedule(setting)
    return Config(
        total_timesteps=ran * setting["total_num_envs"] * setting["rollout_length"],
        env=EnvConfig(name=ENV, num_envs=setting["total_num_envs"]),
        ppo=PPOConfig(num_steps=setting["rollout_length"], num_epochs=setting["epochs"],
                      num_minibatches=setting["num_minibatches"], lr=setting["lr"],
                      anneal_lr=False, gamma=setting["gamma"],
                      gae_lambda=setting["gae_lambda"], clip_eps=setting["clip_eps"],
                      clip_value=True, ent_coef=setting["ent_coef"],
                      vf_coef=setting["vf_coef"], max_grad_norm=setting["max_grad_norm"],
                      schedule=SchedulesConfig(lr=ScheduleConfig(
                          kind="linear", end=stoix_lr_end(setting)))),
        network=NetworkConfig(hidden_sizes=setting["layer_sizes"],
                              activation=setting["activation"]))


def run_program(spec: dict, side: str, launched: float) -> dict:
    """Compiles and runs the whole-run program of the purerl or stoix-lean side.

    Args:
        spec: the program (and `"total_timesteps"`).
        side: "purerl" or "stoix-lean".
        launched: when this process was launched, seconds since the epoch.

    Returns:
        As `run_stoix`, with the compile timed apart (`lower_s`, `compile_s`).
    """
    if side == "purerl":
        import purerl

        config = purerl_config(spec)
        purerl.validate(config, jax.local_device_count())
        train, key, jit = purerl.make_train(config), jax.random.key(SEED), True
        env_steps = config.num_updates * config.batch_size

        def curve(output):
            return purerl_curve(config, output[1])
    else:
        train, key, env_steps, curve = lean_program(spec)
        jit = False
    timings, output = compile_and_run(train, key, jit=jit)
    steps, returns = curve(output)
    return {**timings, "before_train_s": round(curves.seconds_since(launched)
                                               - timings["train_s"], 3),
            "env_steps": env_steps, "steps": steps, "returns": returns, "times": None}


def measure(spec: dict, side: str, launched: float) -> dict:
    """One run of a side.

    Args:
        spec: the program (and `"total_timesteps"`).
        side: one of SIDES.
        launched: when this process was launched, seconds since the epoch.

    Returns:
        The result, JSON-ready, as `peer_curves.side_result` makes it.
    """
    start_jax()
    startup_s = curves.seconds_since(launched)
    run = (run_stoix(spec, launched) if side == "stoix"
           else run_program(spec, side, launched))
    if side != "purerl":
        run["stoix_commit"] = stoix_commit(stoix_root())
    return curves.side_result(spec, side, ENV, run, kind=CURVES[side], startup_s=startup_s,
                              launched=launched)


def main() -> None:
    curves.driver_main(__doc__.splitlines()[0], SIDES, measure, STARTED)


if __name__ == "__main__":
    main()
