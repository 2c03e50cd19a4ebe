"""Trains PPO on CartPole-v1 at the RL Zoo's tuned setting with Stable-Baselines3 (PyTorch), its
RL Zoo, sbx (JAX) or purerl configured to match, for `peers.py --peer sb3` and `--peer sbx`; one
run per process, so that its start-up and peak memory are its own.

    SB3_PYTHON benchmarks/peer_sb3.py sb3-zoo '{"setting": "cartpole-zoo"}' OUT
    SB3_PYTHON benchmarks/peer_sb3.py sb3 '{"setting": "cartpole-zoo"}' OUT
    SB3_PYTHON benchmarks/peer_sb3.py sbx '{"setting": "cartpole-zoo"}' OUT
    python benchmarks/peer_sb3.py purerl '{"setting": "cartpole-zoo"}' OUT

SB3, the RL Zoo and sbx (PyPI `stable-baselines3`, `rl_zoo3`, `sbx-rl`, `gymnasium`; measured at
2.9.2, 2.9.2, 0.28.0 and 1.4.0 with torch 2.13.0 CPU and jax 0.10.2) run under their venv's
Python, where purerl is not installed: this file imports nothing of theirs, nor jax, at its top
(the SB3 sides never import jax). A program is `{"setting": "cartpole-zoo"}` (and
`"total_timesteps"` to cut the budget for a check). The setting is the RL Zoo's tuned
`CartPole-v1` entry of `hyperparams/ppo.yml` (DLR-RM/rl-baselines3-zoo): 8 envs x 32 steps,
batch_size 256 (one minibatch per epoch), 20 epochs, gamma 0.98, gae_lambda 0.8, ent_coef 0.0,
learning_rate `lin_0.001` and clip_range `lin_0.2` (both linear from that value to 0 over the
run), 1e5 steps; SB3's defaults otherwise (two 64x64 tanh MLPs, vf_coef 0.5, max_grad_norm 0.5,
Adam eps 1e-5, advantages normalized per minibatch, no value clipping). The sides:

- sb3-zoo: as shipped, the Zoo's own command, `python -m rl_zoo3.train --algo ppo --env
  CartPole-v1` (`run_zoo`: in this process, its logs into a temporary folder), which adds an
  evaluation of 5 episodes every 25,000 steps, its console output and the model's saving;
  its curve from the Zoo's `Monitor` files (`peer_curves.rollout_curve`).
- sb3: `stable_baselines3.PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8), ...)` and
  `model.learn`, as the Zoo builds it (a `DummyVecEnv` of gymnasium envs, each in SB3's
  `Monitor`), at its fastest: no evaluation, `verbose=0`, on the CPU, one torch thread
  (`torch.set_num_threads(1)`, the Zoo's `--num-threads 1`; torch's default here is a thread
  per core, and its ops on 64-wide layers gain nothing from a second: a 2,048-step check on
  this 2-core machine, loaded by other work, trained in 0.48 s with one thread and 26 s with
  the default two, the threads spinning on busy cores).
- sbx: the same through `sbx.PPO`, one torch thread as well (its rollout buffer is SB3's, in
  torch; its own defaults: Dense kernels lecun-normal, no orthogonal init; an optimizer per
  network, each clipping its own gradient's global norm).
- purerl: `purerl.make_train` on gymnax's CartPole-v1 at the same envs, steps, epochs,
  minibatch, gamma, lambda, entropy, lr annealed linearly to 0, `ppo.schedule.clip_eps` linear
  to 0, no value clipping, `vf_coef=1.0` (SB3's value loss is `vf_coef x` the mean squared
  error, purerl's `vf_coef x 0.5 x` it), the same network, init, optimizer and clip, and the
  same number of updates (SB3 runs whole rollouts to at least the budget: 391 x 256 = 100,096
  steps). Compiled whole (JAX's persistent cache off), then run.

What stays different: the env (gymnasium's CartPole-v1 stepped in Python against gymnax's in
the program; the same dynamics and 500-step limit, both bootstrapping a truncated step from its
value); SB3's and sbx's schedules read the progress after each rollout, purerl's at each
update's start; purerl's PRNG. SB3 and sbx have no separate compile: their time before
training is the imports and building the model (sbx compiles its jitted steps inside `learn`,
in its training time).

Curves: each rollout's (update's) mean return of the episodes that ended in it, from SB3's
`Monitor` episode records on the SB3 and sbx sides (with SB3's own `rollout/ep_rew_mean`, the
mean of the last 100 episodes, kept beside it) and purerl's metrics; time to 475 from the
process's start, of the curve and of its moving mean over a twentieth of the run
(`peer_curves.reaching`): on the SB3 and sbx sides the wall clock at the end of the rollout
that reaches it, on purerl's from its steady training rate. JSON to OUT as `peer_rejax.py`
writes it.
"""

from __future__ import annotations

import time

import peer_curves as curves  # this file's folder is first on sys.path

STARTED = time.time()  # the sides import their packages later, in their functions

SEED = 0
ENV = "CartPole-v1"
# The RL Zoo's tuned PPO CartPole-v1 (DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml).
ZOO = {"n_envs": 8, "n_timesteps": 100_000, "n_steps": 32, "batch_size": 256,
       "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0,
       "learning_rate": 0.001, "clip_range": 0.2}  # the last two linear to 0 (`lin_`)
SIDES = ("purerl", "sb3-zoo", "sb3", "sbx")
# What each side's curve is.
CURVES = {"purerl": "each update's mean return of the episodes that ended in it",
          "sb3-zoo": "each rollout's mean return of the episodes that ended in it (the Zoo's "
                     "Monitor files)",
          "sb3": "each rollout's mean return of the episodes that ended in it (Monitor)",
          "sbx": "each rollout's mean return of the episodes that ended in it (Monitor)"}


def budget(spec: dict) -> tuple[int, int]:
    """A program's budget, and what SB3 makes of it.

    Args:
        spec: the program; `"total_timesteps"`, if there, cuts the Zoo's budget.

    Returns:
        `(total_timesteps asked, env steps SB3 runs)`: it runs whole rollouts of
        `n_envs x n_steps` until it has at least the budget.
    """
    total = int(spec.get("total_timesteps") or ZOO["n_timesteps"])
    rollout = ZOO["n_envs"] * ZOO["n_steps"]
    return total, -(-total // rollout) * rollout


def linear(start: float):
    """The Zoo's `lin_<start>` schedule.

    Args:
        start: the value at the run's start.

    Returns:
        SB3's schedule: a function of the progress remaining (1 -> 0) to the value.
    """
    return lambda progress_remaining: progress_remaining * start


def rollout_curve_callback():
    """An SB3 callback recording, at each rollout's end, the env steps, the wall clock, the mean
    return of the episodes that ended in the rollout (NaN when none) and SB3's
    `ep_rew_mean` (the mean of its last 100 episodes)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class RolloutCurve(BaseCallback):
        def __init__(self):
            super().__init__()
            self.points, self.ended = [], []

        def _on_step(self) -> bool:
            self.ended += [info["episode"]["r"] for info in self.locals["infos"]
                           if "episode" in info]
            return True

        def _on_rollout_end(self) -> None:
            window = [e["r"] for e in self.model.ep_info_buffer]
            self.points.append({
                "steps": self.num_timesteps, "time": time.time(),
                "return": sum(self.ended) / len(self.ended) if self.ended else float("nan"),
                "ep_rew_mean": sum(window) / len(window) if window else float("nan")})
            self.ended = []

    return RolloutCurve()


def run_sb3(spec: dict, side: str, launched: float) -> dict:
    """Builds and trains the sb3 or sbx side's model.

    Args:
        spec: the program, `{"setting": "cartpole-zoo"}` (and `"total_timesteps"`).
        side: "sb3" or "sbx".
        launched: when this process was launched, seconds since the epoch.

    Returns:
        Its timings, env steps and curve (`steps`, `returns`, `times`: the wall clock at each
        rollout's end, `ep_rew_mean`).
    """
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)  # as the Zoo's --num-threads 1: see the docstring
    if side == "sb3":
        from stable_baselines3 import PPO
    else:
        from sbx import PPO
    total, _ = budget(spec)
    start = time.perf_counter()
    model = PPO("MlpPolicy", make_vec_env(ENV, n_envs=ZOO["n_envs"], seed=SEED),
                n_steps=ZOO["n_steps"], batch_size=ZOO["batch_size"],
                gae_lambda=ZOO["gae_lambda"], gamma=ZOO["gamma"], n_epochs=ZOO["n_epochs"],
                ent_coef=ZOO["ent_coef"], learning_rate=linear(ZOO["learning_rate"]),
                clip_range=linear(ZOO["clip_range"]), seed=SEED, device="cpu", verbose=0)
    setup_s = time.perf_counter() - start
    callback = rollout_curve_callback()
    train_start = time.time()
    model.learn(total_timesteps=total, callback=callback)
    train_s = time.time() - train_start
    points = callback.points
    returns = [p["return"] for p in points]
    return {"setup_s": round(setup_s, 3), "train_s": round(train_s, 3),
            "before_train_s": round(train_start - launched, 3),
            "env_steps": int(model.num_timesteps), "times": [p["time"] for p in points],
            "steps": [p["steps"] for p in points], "returns": returns,
            "ep_rew_mean": curves.rounded(p["ep_rew_mean"] for p in points)}


def run_zoo(spec: dict, launched: float) -> dict:
    """The RL Zoo's own command, `python -m rl_zoo3.train --algo ppo --env CartPole-v1`, run
    in this process (`--seed 0`, its logs into a temporary folder; `-n` only when the program
    cuts the budget): its evaluation every 25,000 steps, its console output and the model's
    saving included, as a user first runs it.

    Args:
        spec: the program (and `"total_timesteps"`).
        launched: when this process was launched, seconds since the epoch.

    Returns:
        As `run_sb3`; `before_train_s` up to its first env's creation (the Zoo's `Monitor`
        files' earliest `t_start`), `train_s` from there to the command's return.
    """
    import sys
    import tempfile

    from rl_zoo3.train import train

    total, env_steps = budget(spec)
    with tempfile.TemporaryDirectory(prefix="purerl_peers_zoo_") as logs:
        sys.argv = ["rl_zoo3.train", "--algo", "ppo", "--env", ENV, "-f", logs,
                    "--seed", str(SEED)]
        sys.argv += ["-n", str(total)] if spec.get("total_timesteps") else []
        train()
        finished = time.time()
        t_start, episodes = curves.monitor_episodes(logs)
    rollout = ZOO["n_envs"] * ZOO["n_steps"]
    steps, returns, times = curves.rollout_curve(episodes, ZOO["n_envs"], rollout, env_steps)
    return {"train_s": round(finished - t_start, 3), "before_train_s": round(t_start - launched, 3),
            "env_steps": env_steps, "times": times, "steps": steps, "returns": returns}


def purerl_config(spec: dict):
    """purerl's settings matching the Zoo's.

    Args:
        spec: the program (and `"total_timesteps"`).

    Returns:
        The `purerl.config.Config`, at SB3's number of updates.
    """
    from purerl.config import Config, EnvConfig, PPOConfig, ScheduleConfig, SchedulesConfig

    return Config(
        total_timesteps=budget(spec)[1],
        env=EnvConfig(name=ENV, num_envs=ZOO["n_envs"]),
        ppo=PPOConfig(num_steps=ZOO["n_steps"], num_epochs=ZOO["n_epochs"],
                      num_minibatches=ZOO["n_envs"] * ZOO["n_steps"] // ZOO["batch_size"],
                      lr=ZOO["learning_rate"], anneal_lr=True, gamma=ZOO["gamma"],
                      gae_lambda=ZOO["gae_lambda"], clip_eps=ZOO["clip_range"],
                      clip_value=False, ent_coef=ZOO["ent_coef"], vf_coef=1.0,
                      max_grad_norm=0.5,
                      schedule=SchedulesConfig(clip_eps=ScheduleConfig(kind="linear",
                                                                       end=0.0))))


def run_purerl(spec: dict, launched: float) -> dict:
    """Compiles and runs purerl's whole-run program at the matching setting.

    Args:
        spec: the program (and `"total_timesteps"`).
        launched: when this process was launched, seconds since the epoch.

    Returns:
        As `run_sb3`, with the compile timed apart (`lower_s`, `compile_s`).
    """
    import jax
    from harness import compile_and_run, purerl_curve

    import purerl

    config = purerl_config(spec)
    purerl.validate(config, jax.local_device_count())
    timings, (_, metrics) = compile_and_run(purerl.make_train(config), jax.random.key(SEED))
    steps, returns = purerl_curve(config, metrics)  # NaN where no episode ended
    before_train_s = round(curves.seconds_since(launched) - timings["train_s"], 3)
    env_steps = config.num_updates * config.batch_size
    return {**timings, "before_train_s": before_train_s, "env_steps": env_steps,
            "times": None, "steps": steps, "returns": returns}


def measure(spec: dict, side: str, launched: float) -> dict:
    """One run of a side.

    Args:
        spec: the program (and `"total_timesteps"`).
        side: one of SIDES.
        launched: when this process was launched, seconds since the epoch.

    Returns:
        The result, JSON-ready (`peer_curves.side_result`).
    """
    if side == "purerl":
        from harness import start_jax

        start_jax()
    startup_s = curves.seconds_since(launched)
    runs = {"purerl": lambda: run_purerl(spec, launched),
            "sb3-zoo": lambda: run_zoo(spec, launched)}
    run = runs.get(side, lambda: run_sb3(spec, side, launched))()
    return curves.side_result(spec, side, ENV, run, kind=CURVES[side], startup_s=startup_s,
                              launched=launched)


def main() -> None:
    curves.driver_main(__doc__.splitlines()[0], SIDES, measure, STARTED)


if __name__ == "__main__":
    main()
