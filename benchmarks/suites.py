"""Training steps/s against raw env stepping, per suite beyond gymnax, in one process.

    python benchmarks/suites.py                                  # every suite preset installed
    python benchmarks/suites.py craftax-classic-symbolic --updates 4
    python benchmarks/suites.py craftax-classic-symbolic --reset-pool 0 8   # optimistic resets

Per preset and --reset-pool size (0: every env its own reset): the compile times and env steps/s
(the best of --repeats) of the whole-run program and of the same envs stepped by random actions
through the adapter. Writes results/suites.json and prints the table."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from harness import BENCHMARKS, timed
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tables import rows_table

from purerl.cli.preflight import config_dir
from purerl.config import SUITES
from purerl.envs import make_env
from purerl.nets.agent import make_agent
from purerl.parallel.program import make_train
from purerl.validation import validate


def installed_suite_presets() -> list[str]:
    """The presets in conf/env/ of the suites that are installed."""
    presets = []
    for path in sorted((config_dir() / "env").glob("*.yaml")):
        prefix = str(OmegaConf.load(path).get("env", {}).get("name", "")).partition("/")[0]
        if prefix in SUITES and importlib.util.find_spec(SUITES[prefix].package) is not None:
            presets.append(path.stem)
    return presets


def raw_env_program(config, num_updates: int):
    """`run(key) -> total reward`: the trainer's envs (the agent's wrapped, vmapped step)
    stepped `num_updates` x `ppo.num_steps` times by uniformly random actions."""
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params)
    space, num_envs = env.action_space(env_params), config.env.num_envs

    def run(key):
        key, reset_key = jax.random.split(key)
        _, state = agent.reset_envs(jax.random.split(reset_key, num_envs), env_params)

        def step(carry, _):
            state, key = carry
            key, action_key, env_key = jax.random.split(key, 3)
            action = jax.vmap(space.sample)(jax.random.split(action_key, num_envs))
            _, state, reward, _, _, _ = agent.step_envs(
                jax.random.split(env_key, num_envs), state, action, env_params, None)
            return (state, key), reward.sum()

        _, rewards = jax.lax.scan(step, (state, key), None, num_updates * config.ppo.num_steps)
        return jnp.sum(rewards)

    return run


def measure(preset: str, updates: int, repeats: int, reset_pool: int) -> dict:
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"+env={preset}", f"env.reset_pool={reset_pool}"])
    config = OmegaConf.to_object(cfg)
    config.total_timesteps = updates * config.batch_size
    config = validate(config, jax.local_device_count())
    key = jax.random.key(0)
    programs, compile_s = {}, {}
    for name, program in (("raw", raw_env_program(config, config.num_updates)),
                          ("train", make_train(config))):
        start = time.perf_counter()
        programs[name] = jax.jit(program).lower(key).compile()
        compile_s[name] = time.perf_counter() - start
    best, _ = timed(programs, key, repeats)
    steps = config.num_updates * config.batch_size
    row = {"preset": preset, "env": config.env.name, "num_envs": config.env.num_envs,
           "reset_pool": reset_pool, "env_steps": steps,
           "compile_s_train": round(compile_s["train"], 2),
           "compile_s_raw": round(compile_s["raw"], 2),
           "train_sps": round(steps / best["train"]), "raw_env_sps": round(steps / best["raw"])}
    row["train_over_raw"] = round(row["train_sps"] / row["raw_env_sps"], 3)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="*", help="default: every installed suite's preset")
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--reset-pool", type=int, nargs="+", default=[0])
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results" / "suites.json")
    args = parser.parse_args()
    rows = [measure(preset, args.updates, args.repeats, pool)
            for preset in args.presets or installed_suite_presets() for pool in args.reset_pool]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"backend": jax.default_backend(), "processor": platform.processor(),
                    "cpus": os.cpu_count()}, "rows": rows}, indent=1))
    print(rows_table("suites", rows))


if __name__ == "__main__":
    main()
