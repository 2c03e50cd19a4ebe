"""JaxMARL's baselines (`ippo_ff_mpe.py`, `ippo_cnn_overcooked.py`, `mappo_rnn_smax.py`) as
shipped or lean, or purerl matching them, for `peers.py --peer jaxmarl`: `PYTHON
peer_jaxmarl.py SIDE PROGRAM OUT`, the checkout's root in `$PEER_CHECKOUT`
(benchmarks/README.md: the settings, the sides and what differs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NamedTuple

import harness  # this file's folder is first on sys.path

SEED = 0
# Each row's setting: the baseline script, its config (its TOTAL_TIMESTEPS and NUM_SEEDS are the
# program's), the line a lean side rewrites and how, the preset purerl runs, the agents that
# make a team's return of the script's per-agent one, and what the script returns its curve in
MPE_CONFIG = {"LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4,
              "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
              "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh",
              "ENV_NAME": "MPE_simple_spread_v3", "ENV_KWARGS": {}, "ANNEAL_LR": True}
# ippo_cnn_overcooked.yaml on cramped_room (its shaping horizon half the budget, as the yaml's)
OVERCOOKED_CONFIG = {"LR": 5e-4, "NUM_ENVS": 64, "NUM_STEPS": 256, "UPDATE_EPOCHS": 4,
                     "NUM_MINIBATCHES": 16, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
                     "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
                     "ACTIVATION": "relu", "ENV_NAME": "overcooked", "ANNEAL_LR": True}
# mappo_homogenous_rnn_smax.yaml
SMAX_CONFIG = {"LR": 0.002, "NUM_ENVS": 128, "NUM_STEPS": 128, "FC_DIM_SIZE": 128,
               "GRU_HIDDEN_DIM": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99,
               "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "SCALE_CLIP_EPS": False, "ENT_COEF": 0.0,
               "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.25, "ACTIVATION": "relu",
               "OBS_WITH_AGENT_ID": True, "ENV_NAME": "HeuristicEnemySMAX", "MAP_NAME": "2s3z",
               "SEED": SEED, "ENV_KWARGS": {"see_enemy_actions": True, "walls_cause_death": True,
                                            "attack_mode": "closest"},
               "ANNEAL_LR": True}


class Setting(NamedTuple):
    script: str  # under the checkout
    config: dict
    callback: str  # the per-update line that logs to wandb
    lean: str  # what the lean side puts in its place
    preset: str  # purerl's, at the script's settings
    env: str
    agents: int  # the script's curve is one agent's return; the team's is this many times it
    recorded: bool  # the script returns no metrics: its curve comes through its callback
    # (old, new) rewrites the script needs to run on jaxmarl 0.2.0 at all, on both sides
    fixes: tuple = ()


SETTINGS = {
    "mpe": Setting("baselines/IPPO/ippo_ff_mpe.py", MPE_CONFIG,
                   "jax.experimental.io_callback(callback, None, metric)", "pass",
                   "mpe-simple-spread", "jaxmarl/MPE_simple_spread_v3", 3, False),
    "overcooked": Setting("baselines/IPPO/ippo_cnn_overcooked.py", OVERCOOKED_CONFIG,
                          "jax.debug.callback(callback, metric)", "pass",
                          "overcooked-cramped-room", "jaxmarl/overcooked", 2, False,
                          # `action_space` takes the agent (in its own checkout's jaxmarl too)
                          (("env.action_space().n", "env.action_space(env.agents[0]).n"),)),
    "smax": Setting("baselines/MAPPO/mappo_rnn_smax.py", SMAX_CONFIG,
                    "wandb.log(", "record(", "smax-2s3z", "jaxmarl/HeuristicEnemySMAX", 5,
                    True),
}
CURVES = {
    "purerl": "each update's mean team return of the episodes that ended in it",
    "jaxmarl": "JaxMARL's metric times the agents, the team's: per update, MPE's and "
               "Overcooked's mean over steps and agents of each agent's last finished "
               "episode's return (its LogWrapper); SMAX's mean return of the episodes that "
               "ended in the update (its callback's `returns`)",
}
CURVES["jaxmarl-lean"] = CURVES["jaxmarl"]


def program(setting: str, total_timesteps: int, num_seeds: int = 1) -> dict:
    return {"setting": setting, "env": SETTINGS[setting].env,
            "num_envs": SETTINGS[setting].config["NUM_ENVS"],
            "total_timesteps": total_timesteps, "num_seeds": num_seeds}


PEERS = {"jaxmarl": harness.Peer(
    "peer_jaxmarl.py", ("jaxmarl", "jaxmarl-lean"),
    {"mpe": [program("mpe", 10_000_000)], "mpe-seeds": [program("mpe", 10_000_000, 4)],
     "overcooked": [program("overcooked", 131_072)], "smax": [program("smax", 1_048_576)]},
    ["jaxmarl", "jax", "jaxlib", "flax", "optax", "distrax", "numpy"],
    "git clone https://github.com/FLAIROx/JaxMARL, make a venv with jaxmarl==0.2.0 hydra-core "
    "wandb distrax, then --checkout DIR --peer-python PATH",
    # Overcooked's script runs at about 130 steps/s here (XLA's CPU convolutions): its lean
    # side alone, at an eighth of the preset's budget, fits a sitting; a run of it prints
    # nothing for about 17 minutes
    row_sides={"overcooked": (("purerl",), ("jaxmarl-lean",))}, hung_after_s=3600,
    checkout_file=SETTINGS["mpe"].script)}


def purerl_config(spec: dict):
    """purerl's `Config` at a program's setting: its preset's (whose values are the script's
    yaml's), at the program's budget and seeds."""
    from purerl.cli.preflight import compose_jobs

    setting = SETTINGS[spec["setting"]]
    overrides = [f"+env={setting.preset}", f"total_timesteps={spec['total_timesteps']}",
                 f"num_seeds={spec['num_seeds']}"]
    if spec["setting"] == "overcooked":  # the shaping over half the budget, as the yaml's
        overrides.append(f"env.reward_shaping_horizon={spec['total_timesteps'] // 2}")
    return compose_jobs(overrides)[0]


def script_config(spec: dict) -> dict:
    """The script's config at a program's budget."""
    config = dict(SETTINGS[spec["setting"]].config, TOTAL_TIMESTEPS=spec["total_timesteps"])
    if spec["setting"] == "overcooked":
        from jaxmarl.environments.overcooked import overcooked_layouts

        config.update(ENV_KWARGS={"layout": overcooked_layouts["cramped_room"]},
                      REW_SHAPING_HORIZON=spec["total_timesteps"] // 2)
    return config


def jaxmarl_program(spec: dict, lean: bool):
    """`(train, key, env steps per seed, curve)` of the script's `make_train`: its per-update
    callback as shipped (a `wandb.log`, wandb initialized disabled as its `main` does), or as
    the setting's lean side rewrites it."""
    import types

    import jax
    import numpy as np

    setting = SETTINGS[spec["setting"]]
    path = Path(os.environ["PEER_CHECKOUT"]) / setting.script
    source = path.read_text()
    for old, new in setting.fixes:
        assert old in source, f"{path} no longer has {old}"
        source = source.replace(old, new)
    if lean:
        assert setting.callback in source, f"{path} no longer has {setting.callback}"
        source = source.replace(setting.callback, setting.lean)
    name = path.stem
    module = sys.modules[name] = types.ModuleType(name)  # flax reads it there
    logged = []  # what the callback hands wandb (or, lean, `record`) per update
    module.record = logged.append
    exec(compile(source, str(path), "exec"), module.__dict__)
    if not lean:
        module.wandb.init(mode="disabled")
        if setting.recorded:
            module.wandb = types.SimpleNamespace(log=_logging_to(logged, module.wandb.log))
    config = script_config(spec)
    train, key = module.make_train(config), jax.random.PRNGKey(SEED)  # sets NUM_UPDATES
    if spec["num_seeds"] > 1:
        train, key = jax.vmap(train), jax.random.split(key, spec["num_seeds"])
    updates, batch = int(config["NUM_UPDATES"]), config["NUM_STEPS"] * config["NUM_ENVS"]

    def curve(output):
        if setting.recorded:
            returns = np.asarray([float(row["returns"]) for row in logged])
        else:
            returns = np.asarray(output["metrics"]["returned_episode_returns"])
            returns = returns.reshape(spec["num_seeds"], updates, -1).mean(axis=(0, 2))
        return ([batch * k for k in range(1, updates + 1)],
                [setting.agents * float(v) for v in returns])

    return train, key, updates * batch, curve


def _logging_to(logged: list, log):
    """`wandb.log` that also keeps what it logs."""
    def log_and_keep(row, *args, **kwargs):
        logged.append(row)
        return log(row, *args, **kwargs)

    return log_and_keep


def measure(spec: dict, side: str, launched: float) -> dict:
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    if side == "purerl":
        run = harness.purerl_side(purerl_config(spec), launched=launched)
    else:
        sys.path.insert(0, str(Path(os.environ["PEER_CHECKOUT"]) / "baselines" / "IPPO"))
        run = harness.program_side(*jaxmarl_program(spec, side == "jaxmarl-lean"), launched)
    return harness.side_result(spec, side, spec["env"], run, kind=CURVES[side],
                               startup_s=startup_s, launched=launched,
                               num_seeds=spec["num_seeds"])


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], ("purerl", "jaxmarl", "jaxmarl-lean"), measure)
