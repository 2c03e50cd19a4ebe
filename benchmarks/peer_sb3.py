"""PPO on CartPole-v1 at the RL Zoo's tuned setting: Stable-Baselines3 as shipped (the RL Zoo's
command, `sb3-zoo`) and lean (`sb3`), sbx, or purerl matching them, for `peers.py --peer sb3` and
`--peer sbx`: `PYTHON peer_sb3.py SIDE '{"setting": "cartpole-zoo"}' OUT`, SB3's sides under their
venv without purerl (benchmarks/README.md: the setting, the sides and what differs)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import harness  # this file's folder is first on sys.path

SEED, ENV = 0, "CartPole-v1"
# The RL Zoo's tuned PPO CartPole-v1 (DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml).
ZOO = {"n_envs": 8, "n_timesteps": 100_000, "n_steps": 32, "batch_size": 256,
       "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0,
       "learning_rate": 0.001, "clip_range": 0.2}  # the last two linear to 0 (`lin_`)
ROLLOUT = ZOO["n_envs"] * ZOO["n_steps"]
SIDES = ("purerl", "sb3-zoo", "sb3", "sbx")
PEERS = {"sb3": harness.Peer(
    "peer_sb3.py", ("sb3-zoo", "sb3"), {"cartpole-zoo": [{"setting": "cartpole-zoo"}]},
    ["stable-baselines3", "rl_zoo3", "torch", "gymnasium", "numpy"],
    "python3.11 -m venv ../sb3-venv && ../sb3-venv/bin/pip install stable-baselines3 rl_zoo3 "
    "sbx-rl gymnasium torch jax==0.10.2 jaxlib==0.10.2, then --peer-python ../sb3-venv/bin/python"),
    "sbx": harness.Peer(
    "peer_sb3.py", ("sbx",), {"cartpole-zoo": [{"setting": "cartpole-zoo"}]},
    ["sbx-rl", "stable-baselines3", "jax", "jaxlib", "flax", "optax", "gymnasium", "numpy"],
    "the sb3 peer's venv holds sbx too: --peer-python ../sb3-venv/bin/python")}
ENDED = "each rollout's mean return of the episodes that ended in it"  # each side's curve
CURVES = {"purerl": ENDED.replace("rollout", "update"), "sb3": f"{ENDED} (Monitor)",
          "sbx": f"{ENDED} (Monitor)", "sb3-zoo": f"{ENDED} (the Zoo's Monitor files)"}


def budget(spec: dict) -> tuple[int, int]:
    """`(total_timesteps asked, env steps SB3 runs)`: whole rollouts to at least the budget."""
    total = int(spec.get("total_timesteps") or ZOO["n_timesteps"])
    return total, -(-total // ROLLOUT) * ROLLOUT


def run_sb3(spec: dict, side: str, launched: float) -> dict:
    """Builds and trains the sb3 or sbx side's model; its curve is read at each rollout's end."""
    import importlib

    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)  # as the Zoo's --num-threads 1
    PPO = importlib.import_module("stable_baselines3" if side == "sb3" else "sbx").PPO
    curve, ended = {"steps": [], "times": [], "returns": [], "ep_rew_mean": []}, []

    def mean(values) -> float:
        return sum(values) / len(values) if values else float("nan")

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            ended.extend(i["episode"]["r"] for i in self.locals["infos"] if "episode" in i)
            return True

        def _on_rollout_end(self) -> None:  # ep_rew_mean: SB3's mean of its last 100 episodes
            last = (self.num_timesteps, time.time(), mean(ended),
                    mean([e["r"] for e in self.model.ep_info_buffer]))
            for values, value in zip(curve.values(), last):
                values.append(value)
            ended.clear()

    callback, start = Curve(), time.perf_counter()
    model = PPO("MlpPolicy", make_vec_env(ENV, n_envs=ZOO["n_envs"], seed=SEED),
                n_steps=ZOO["n_steps"], batch_size=ZOO["batch_size"], gamma=ZOO["gamma"],
                gae_lambda=ZOO["gae_lambda"], n_epochs=ZOO["n_epochs"], ent_coef=ZOO["ent_coef"],
                learning_rate=lambda p: p * ZOO["learning_rate"],  # the Zoo's `lin_` schedules
                clip_range=lambda p: p * ZOO["clip_range"], seed=SEED, device="cpu", verbose=0)
    setup_s, train_start = time.perf_counter() - start, time.time()
    model.learn(total_timesteps=budget(spec)[0], callback=callback)
    train_s = time.time() - train_start
    return {"setup_s": round(setup_s, 3), "train_s": round(train_s, 3), "before_train_s":
            round(train_start - launched, 3), "env_steps": int(model.num_timesteps),
            **curve, "ep_rew_mean": harness.rounded(curve["ep_rew_mean"])}


def monitor_episodes(folder: Path) -> tuple[float, list[tuple]]:
    """SB3 `Monitor` files under `folder` (`<rank>.monitor.csv`: a `#` JSON line with the wall
    clock `t_start`, a header, `r,l,t` rows): the earliest start and `(rank, return, length,
    wall clock)` per episode."""
    starts, episodes = [], []
    for path in sorted(Path(folder).rglob("*.monitor.csv")):
        lines = path.read_text().splitlines()
        starts.append(json.loads(lines[0].lstrip("#"))["t_start"])
        for row in lines[2:]:
            r, length, t = row.split(",")[:3]
            episodes.append((int(path.name.split(".")[0]), float(r), int(length),
                             starts[-1] + float(t)))
    return min(starts), episodes


def rollout_curve(episodes: list[tuple], n_envs: int, rollout_steps: int,
                  total_steps: int) -> tuple[list, list, list]:
    """Each rollout's mean return of the episodes that ended in it: the `n_envs` envs step
    together, so env `rank`'s episode ends at `n_envs x` that env's steps so far."""
    count = -(-total_steps // rollout_steps)
    sums, ended, times, lived = [0.0] * count, [0] * count, [None] * count, {}
    for rank, value, length, at in episodes:
        lived[rank] = lived.get(rank, 0) + length
        rollout = min(count, -(-n_envs * lived[rank] // rollout_steps)) - 1
        sums[rollout] += value
        ended[rollout] += 1
        times[rollout] = max(at, times[rollout] or at)
    returns = [s / n if n else float("nan") for s, n in zip(sums, ended)]
    return [rollout_steps * (k + 1) for k in range(count)], returns, times


def run_zoo(spec: dict, launched: float) -> dict:
    """The Zoo's own command, run here (its logs into a temporary folder, `-n` only for a cut
    budget); timed from its first env's creation (its Monitor files' `t_start`) to its return."""
    import sys
    import tempfile

    from rl_zoo3.train import train

    total, env_steps = budget(spec)
    with tempfile.TemporaryDirectory(prefix="purerl_peers_zoo_") as logs:
        sys.argv = ["rl_zoo3.train", "--algo", "ppo", "--env", ENV, "-f", logs, "--seed", str(SEED)]
        sys.argv += ["-n", str(total)] if spec.get("total_timesteps") else []
        train()
        finished = time.time()
        t_start, episodes = monitor_episodes(logs)
    steps, returns, times = rollout_curve(episodes, ZOO["n_envs"], ROLLOUT, env_steps)
    return {"train_s": round(finished - t_start, 3), "before_train_s": round(t_start - launched, 3),
            "env_steps": env_steps, "times": times, "steps": steps, "returns": returns}


def purerl_config(spec: dict):
    """purerl's `Config` at the Zoo's setting and SB3's updates."""
    from purerl.config import Config, EnvConfig, PPOConfig, ScheduleConfig, SchedulesConfig

    return Config(
        total_timesteps=budget(spec)[1], env=EnvConfig(name=ENV, num_envs=ZOO["n_envs"]),
        ppo=PPOConfig(num_steps=ZOO["n_steps"], num_epochs=ZOO["n_epochs"],
                      num_minibatches=ROLLOUT // ZOO["batch_size"], lr=ZOO["learning_rate"],
                      anneal_lr=True, gamma=ZOO["gamma"], gae_lambda=ZOO["gae_lambda"],
                      clip_eps=ZOO["clip_range"], clip_value=False, ent_coef=ZOO["ent_coef"],
                      vf_coef=1.0, max_grad_norm=0.5,
                      schedule=SchedulesConfig(clip_eps=ScheduleConfig(kind="linear", end=0.0))))


def measure(spec: dict, side: str, launched: float) -> dict:
    """One run of a side, JSON-ready (`harness.side_result`)."""
    if side == "purerl":
        harness.start_jax()
    startup_s = harness.seconds_since(launched)
    run = (harness.purerl_side(purerl_config(spec), launched=launched) if side == "purerl" else
           run_zoo(spec, launched) if side == "sb3-zoo" else run_sb3(spec, side, launched))
    return harness.side_result(spec, side, ENV, run, kind=CURVES[side], startup_s=startup_s,
                               launched=launched)


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], SIDES, measure)
