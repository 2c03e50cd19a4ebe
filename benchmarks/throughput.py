"""Training throughput and what it costs, in one process: purerl's whole-run program against the
same envs stepped by random actions (raw), the best of --repeats calls taking turns.

    python benchmarks/throughput.py                  # CartPole at num_envs 4, 64, 1024
    python benchmarks/throughput.py --num-envs 4096 16384 --out results/gpu/throughput.json
    python benchmarks/throughput.py --suites         # every installed suite's preset
    python benchmarks/throughput.py --suites craftax-classic-symbolic --reset-pool 0 8
    python benchmarks/throughput.py --memory         # Breakout-MinAtar, 4096 and 16384 envs
    python benchmarks/throughput.py --population     # 16 vmapped members against one

- default, per num_envs: the compile time (the best of two cold ones, and from JAX's persistent
  cache) and steps/s of training and of raw gymnax stepping that keeps the rewards and dones,
  and that keeps one scalar (an upper bound no trainer reaches).
- --suites, per preset of a suite beyond gymnax and --reset-pool size (0: each env its own
  reset): compile times and steps/s of training and of raw stepping through the adapter.
- --memory, per num_envs: XLA's accounting of Breakout-MinAtar's one-update program, compiled,
  not run, as `purerl.plan` builds it and with the CPU plan's tricks forced on.
- --population, per num_envs: one member, a 16-member sweep (4 lr x 4 ent_coef) and one member
  with 16x the envs; cost: a training time over one member's (16 runs in turn: 16x).
Each writes benchmarks/results/MODE.json (--out) and prints its table."""

import argparse
import importlib.util
import itertools
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from harness import BENCHMARKS, timed  # this file's folder is first on sys.path
from hydra import compose, initialize_config_dir
from jax.experimental.compilation_cache import compilation_cache
from omegaconf import OmegaConf
from tables import rows_table

from purerl.cli.preflight import config_dir, load_config
from purerl.config import SUITES, Config, EnvConfig, SweepConfig
from purerl.envs import make_env
from purerl.logging.history import final_returns
from purerl.nets.agent import make_agent
from purerl.parallel.program import make_train
from purerl.plan import execution_plan
from purerl.validation import validate

COLD_COMPILES = 2  # on a shared machine one compile can take 1.3x another of the same program
MEMORY_PRESET, GIB = "breakout-minatar", 2.0 ** 30
SWEEP = {"lr": [1e-3, 5e-4, 2.5e-4, 1e-4], "ent_coef": [0.0, 0.003, 0.01, 0.03]}
# Each mode's options with their defaults (an option a mode does not list is refused there)
MODES = {"throughput": {"env": "CartPole-v1", "num_envs": [4, 64, 1024], "timesteps": 500_000,
                        "min_updates": 8, "repeats": 5},
         "suites": {"reset_pool": [0], "updates": 4, "repeats": 2},
         "memory": {"num_envs": [4096, 16384]},
         "population": {"num_envs": [4, 64], "updates": 40, "repeats": 3}}


def compile_and_time(programs: dict, repeats: int = 0) -> tuple[dict, dict, dict, dict]:
    """Each `run(key)` program jitted and compiled for seed 0, each compile timed; then, with
    `repeats`, all called by `harness.timed`. Returns the compiled programs, their compile
    seconds, their best seconds and last outputs (both empty without `repeats`)."""
    key, compiled, compile_s = jax.random.key(0), {}, {}
    for name, program in programs.items():
        start = time.perf_counter()
        compiled[name] = jax.jit(program).lower(key).compile()
        compile_s[name] = time.perf_counter() - start
    return compiled, compile_s, *(timed(compiled, key, repeats) if repeats else ({}, {}))


def raw_env_program(config, env_params, reset_envs, step_envs, sample, collect: bool = False):
    """`run(key) -> total reward`: `config`'s envs (`reset_envs`, `step_envs`, vmapped as the
    agent's) stepped `num_updates` x `ppo.num_steps` times by `sample(key)`'s random actions.
    With `collect`, each rollout keeps its `[T, B]` rewards and dones, the least a trainer keeps;
    without, each step yields one scalar, which XLA:CPU compiles as one function (under
    `xla_cpu_small_while_loop_byte_threshold`): an upper bound no trainer can reach."""
    num_envs = config.env.num_envs

    def run(key):
        key, reset_key = jax.random.split(key)
        _, state = reset_envs(jax.random.split(reset_key, num_envs), env_params)

        def step(carry, _):
            state, key = carry
            key, action_key, env_key = jax.random.split(key, 3)
            _, state, reward, terminated, truncated, _ = step_envs(
                jax.random.split(env_key, num_envs), state, sample(action_key), env_params)
            done = (terminated | truncated).astype(reward.dtype)
            return (state, key), ((reward, done) if collect else reward.sum())

        def rollout(carry, _):
            carry, out = jax.lax.scan(step, carry, None, config.ppo.num_steps)
            return carry, (out[0] * (1 - out[1]) if collect else out).sum()

        return jax.lax.scan(rollout, (state, key), None, config.num_updates)[1].sum()

    return run


def throughput_row(args, num_envs: int, cache_root: str) -> dict:
    config = Config(env=EnvConfig(name=args.env, num_envs=num_envs))
    config.total_timesteps = max(args.timesteps, args.min_updates * config.batch_size)
    validate(config, jax.local_device_count())
    env, env_params = make_env(config.env)
    num_actions = env.action_space(env_params).n
    envs = (config, env_params, jax.vmap(env.reset, in_axes=(0, None)),
            jax.vmap(env.step, in_axes=(0, 0, 0, None)),
            lambda key: jax.random.randint(key, (num_envs,), 0, num_actions))
    # The raw programs first, so that JAX's one-time start-up is not in a compile timed below.
    raw, *_ = compile_and_time({"raw": raw_env_program(*envs, collect=True),
                                "scalar": raw_env_program(*envs)})
    compile_s = []
    for attempt in range(COLD_COMPILES + 1):  # cold, each into an empty cache; then from it
        if attempt < COLD_COMPILES:
            compilation_cache.reset_cache()
            compilation_cache.set_cache_dir(tempfile.mkdtemp(dir=cache_root))
        train, seconds, *_ = compile_and_time({"train": make_train(config)})
        compile_s.append(seconds["train"])
    *cold_s, cached_s = compile_s
    best, outputs = timed({**raw, **train}, jax.random.key(0), args.repeats)
    metrics = outputs["train"][1]
    final_return = final_returns(np.asarray(metrics.episode_return_sum),
                                 np.asarray(metrics.episode_count))[0]
    env_steps = config.num_updates * config.batch_size
    return {"num_envs": num_envs, "env_steps": env_steps, "compile_s": round(min(cold_s), 3),
            "cold_compiles_s": [round(t, 3) for t in cold_s],
            "cached_compile_s": round(cached_s, 3), "train_s": round(best["train"], 4),
            "train_sps": round(env_steps / best["train"]),
            "raw_env_sps": round(env_steps / best["raw"]),
            "ratio": round(best["raw"] / best["train"], 4),
            "raw_scalar_output_sps": round(env_steps / best["scalar"]),
            "final_return": None if final_return is None else round(final_return, 1)}


def throughput(args):
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    with tempfile.TemporaryDirectory(prefix="purerl_xla_cache_") as cache_root:
        yield from (throughput_row(args, num_envs, cache_root) for num_envs in args.num_envs)


def preset_config(preset: str, updates: int, *overrides: str):
    """A preset of conf/env/ with Hydra `overrides`, validated, its budget `updates` updates."""
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"+env={preset}", *overrides])
    cfg.total_timesteps = updates * cfg.env.num_envs * cfg.ppo.num_steps
    return load_config(cfg, jax.local_device_count())


def installed_suite_presets() -> list[str]:
    """The presets in conf/env/ of the suites that are installed."""
    suites = {path.stem: str(OmegaConf.load(path).get("env", {}).get("name", "")).partition("/")[0]
              for path in sorted((config_dir() / "env").glob("*.yaml"))}
    return [preset for preset, suite in suites.items()
            if suite in SUITES and importlib.util.find_spec(SUITES[suite].package) is not None]


def suite_row(args, preset: str, reset_pool: int) -> dict:
    config = preset_config(preset, args.updates, f"env.reset_pool={reset_pool}")
    env, env_params = make_env(config.env)
    agent = make_agent(config.env, config.network, env, env_params)
    space, num_envs = env.action_space(env_params), config.env.num_envs
    raw = raw_env_program(config, env_params, agent.reset_envs,
                          lambda *step_args: agent.step_envs(*step_args, None),
                          lambda key: jax.vmap(space.sample)(jax.random.split(key, num_envs)))
    _, compile_s, best, _ = compile_and_time({"raw": raw, "train": make_train(config)},
                                             args.repeats)
    steps = config.num_updates * config.batch_size
    row = {"preset": preset, "env": config.env.name, "num_envs": num_envs,
           "reset_pool": reset_pool, "env_steps": steps,
           "compile_s_train": round(compile_s["train"], 2),
           "compile_s_raw": round(compile_s["raw"], 2), "train_sps": round(steps / best["train"]),
           "raw_env_sps": round(steps / best["raw"])}
    return {**row, "train_over_raw": round(row["train_sps"] / row["raw_env_sps"], 3)}


def suites(args):
    for preset in args.suites or installed_suite_presets():
        for reset_pool in args.reset_pool:
            yield suite_row(args, preset, reset_pool)


def memory(args):
    for num_envs, tricks_forced in itertools.product(args.num_envs, (False, True)):
        plan = execution_plan()
        if tricks_forced:
            plan = plan._replace(resets_ahead=2**62, gather_ahead_bytes=2**62)
        config = preset_config(MEMORY_PRESET, 1, f"env.num_envs={num_envs}")
        compiled, compile_s, *_ = compile_and_time({"train": make_train(config, plan=plan)})
        stats = compiled["train"].memory_analysis()
        sizes = {"arguments": stats.argument_size_in_bytes,
                 "outputs": stats.output_size_in_bytes, "temporaries": stats.temp_size_in_bytes}
        yield {"num_envs": num_envs, "cpu_tricks_forced": tricks_forced,
               "compile_s": round(compile_s["train"], 1),
               **{f"{name}_gib": round(size / GIB, 3) for name, size in sizes.items()},
               "peak_gib": round(sum(sizes.values()) / GIB, 3)}


def population(args):
    members = len(SWEEP["lr"]) * len(SWEEP["ent_coef"])
    for num_envs in args.num_envs:
        configs = {name: Config(env=EnvConfig(name="CartPole-v1", num_envs=envs), sweep=sweep)
                   for name, envs, sweep in (("one", num_envs, SweepConfig()),
                                             ("population", num_envs, SweepConfig(**SWEEP)),
                                             ("wide", num_envs * members, SweepConfig()))}
        for config in configs.values():
            config.total_timesteps = args.updates * config.batch_size
        _, compile_s, best, _ = compile_and_time(
            {name: make_train(config) for name, config in configs.items()}, args.repeats)
        steps = {name: config.total_timesteps for name, config in configs.items()}
        yield {"num_envs": num_envs, "updates": args.updates, "members": members,
               **{f"compile_s_{name}": round(s, 3) for name, s in compile_s.items()},
               **{f"train_s_{name}": round(s, 4) for name, s in best.items()},
               "sps_one": round(steps["one"] / best["one"]),
               "sps_population": round(steps["population"] * members / best["population"]),
               "cost": round(best["population"] / best["one"], 3),
               "cost_wide": round(best["wide"] / best["one"], 3)}


def write_results(out: Path, rows: list[dict], **settings) -> dict:
    """`settings`, the machine's facts and `rows` as JSON at `out`."""
    device = jax.devices()[0]
    result = {**settings, "device": (f"cpu ({os.cpu_count()} cores)" if device.platform == "cpu"
                                     else f"{device.platform}: {device.device_kind}"),
              "num_devices": jax.local_device_count(),
              "host": platform.processor() or platform.machine(), "jax": jax.__version__,
              "machine": {"backend": jax.default_backend(), "processor": platform.processor(),
                          "cpus": os.cpu_count()}, "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(["defaults:", *(f"  {mode}: {opts}" for mode, opts in MODES.items())]))
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--suites", nargs="*", metavar="PRESET",
                       help="these suites' presets (default: every installed suite's)")
    for mode in ("--memory", "--population"):
        modes.add_argument(mode, dest="mode", action="store_const", const=mode[2:],
                           default="throughput")
    parser.add_argument("--env")
    parser.add_argument("--num-envs", type=int, nargs="+")
    parser.add_argument("--timesteps", type=int)
    parser.add_argument("--min-updates", type=int)
    parser.add_argument("--updates", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--reset-pool", type=int, nargs="+")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/MODE.json")
    args = parser.parse_args()
    args.mode = "suites" if args.suites is not None else args.mode
    for option in {option for defaults in MODES.values() for option in defaults}:
        if getattr(args, option) is None:
            setattr(args, option, MODES[args.mode].get(option))
        elif option not in MODES[args.mode]:
            parser.error(f"--{option.replace('_', '-')} does not apply to the {args.mode} mode")
    args.out = args.out or BENCHMARKS / "results" / f"{args.mode}.json"
    return args


def main() -> None:
    args = parse_args()
    rows = []
    for row in {"throughput": throughput, "suites": suites, "memory": memory,
                "population": population}[args.mode](args):
        print(json.dumps(row), flush=True)
        rows.append(row)
    write_results(args.out, rows, **{"throughput": {"env": args.env},
                                              "memory": {"preset": MEMORY_PRESET},
                                              "population": {"sweep": SWEEP}}.get(args.mode, {}))
    print(rows_table(args.mode, rows) + f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
