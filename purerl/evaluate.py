"""Command line: `python -m purerl.evaluate run=<run dir> [key=value ...]` (`--help`: this).

Loads a run's final (or `checkpoint=best`) checkpoint and its config, plays `episodes` episodes
per temperature on fresh eval envs, and prints a table. `render=true` also writes an animated
GIF of one episode at the first temperature, for envs that gymnax can draw.

    run=<dir>            the run directory (required)
    checkpoint=final     final (the newest checkpoint) or best (checkpoint.best=true runs)
    episodes=16          episodes per temperature and seed
    temperatures=[1.0,0.0]  sampling temperatures (0.0: the greedy action); default: the run's
    max_steps=null       steps per episode at most; null: the run's eval.max_steps
    seed=0               the evaluation's PRNG seed
    render=false         write <run>/episode_T<temperature>.gif
    member=null          one member (seed) alone; null: all seeds pooled, or a sweep's best
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path
from typing import Dict, List, Optional

from purerl.cli.run_args import parse_run_args, run_command
from purerl.config import ConfigError
from purerl.validation import validate

# Envs gymnax's Visualizer draws.
NEEDS_PYGAME = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0",
                "MountainCarContinuous-v0")  # drawn through gymnasium, which uses pygame
RENDERABLE = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0",
              "MountainCarContinuous-v0", "Catch-bsuite", "Asterix-MinAtar", "Breakout-MinAtar",
              "Freeway-MinAtar", "Seaquest-MinAtar", "SpaceInvaders-MinAtar", "Pong-misc",
              "PointRobot-misc", "MetaMaze-misc", "FourRooms-misc")


@dataclasses.dataclass
class EvaluateArgs:
    run: str = ""
    checkpoint: str = "final"
    episodes: int = 16
    temperatures: Optional[List[float]] = None
    max_steps: Optional[int] = None
    seed: int = 0
    render: bool = False
    member: Optional[int] = None  # one member (seed) alone; null: all seeds, a sweep's best


def parse_args(argv: List[str]) -> EvaluateArgs:
    """`key=value` arguments into `EvaluateArgs`; raises ConfigError.

    Args:
        argv: the arguments after `python -m purerl.evaluate`.

    Returns:
        The `EvaluateArgs`.

    Raises:
        ConfigError: an unknown key, a bad value, empty `temperatures` or `episodes` <= 0.
    """
    args = parse_run_args(argv, EvaluateArgs)
    if args.temperatures is not None and not args.temperatures:
        raise ConfigError("temperatures=[] is empty: give at least one, e.g. temperatures=[0.0]")
    if args.episodes <= 0:
        raise ConfigError(f"episodes={args.episodes} must be > 0")
    return args


def evaluate_run(args: EvaluateArgs) -> Dict[str, Dict[str, float]]:
    """Plays the episodes; returns {temperature: {"return", "return_std", "length"}}, means
    over all seeds' episodes (`return_std` over the seeds' means).

    With `render`, also writes `episode_T<t>.gif` of the first temperature into the run
    directory: member 0's episode, or `member`'s.

    Args:
        args: the parsed arguments (`parse_args`).

    Returns:
        The table, keyed by the temperature as a string ("0.0").

    Raises:
        ConfigError: no intact checkpoint, `member` out of range, a setting that does not fit,
            or `render` for an env gymnax cannot draw (or without pygame).
    """
    # JAX and gymnax (1 s): after the command's arguments are checked
    import jax
    import numpy as np

    from purerl.algos.evaluation import make_evaluator, with_evaluation
    from purerl.envs import make_env
    from purerl.parallel.devices import map_seeds
    from purerl.reports.sweep import is_sweep, point_label
    from purerl.storage.restoring import restore_run
    from purerl.storage.trained import checked_member

    saved = restore_run(Path(args.run), args.checkpoint)
    config, state, update = saved.config, saved.state, saved.update
    member = checked_member(saved, args.run, args.member, best_by_default=False)
    members = config.num_members
    if member is not None:
        state, members = jax.tree.map(lambda x: x[member:member + 1], state), 1
    config = with_evaluation(config, args.episodes, args.temperatures, args.max_steps)
    validate(config, jax.local_device_count())
    if args.render and config.env.name not in RENDERABLE:
        raise ConfigError(f"render=true: gymnax cannot draw {config.env.name} "
                          f"(it draws {', '.join(RENDERABLE)})")
    pygame_missing = importlib.util.find_spec("pygame") is None
    if args.render and config.env.name in NEEDS_PYGAME and pygame_missing:
        raise ConfigError(f"render=true: drawing {config.env.name} needs pygame: "
                          "pip install 'purerl[render]'")

    env, env_params = make_env(config.env)
    evaluator = make_evaluator(saved.agent, env_params, config.eval)
    eval_key = jax.random.key(args.seed)
    result = jax.jit(map_seeds(evaluator.evaluate, members))(
        state.params, state.normalizer.obs, jax.random.split(eval_key, members))
    returns, lengths = np.asarray(result.episode_return), np.asarray(result.episode_length)
    table = {str(float(t)): {"return": float(returns[:, i].mean()),
                             "return_std": float(returns[:, i].std()),
                             "length": float(lengths[:, i].mean())}
             for i, t in enumerate(config.eval.temperatures)}
    who = f"{config.num_seeds} seed(s)" if member is None else f"member {member}"
    if member is not None and is_sweep(config):
        who += f" ({point_label(config.sweep.grid()[member // config.num_seeds])})"
    print(f"{config.env.name}, checkpoint of update {update} ({args.checkpoint}), "
          f"{who} x {args.episodes} episodes")
    print(f"{'temperature':>11} | {'return':>10} | {'std (seeds)':>11} | {'length':>8}")
    for t, row in table.items():
        print(f"{t:>11} | {row['return']:>10.2f} | {row['return_std']:>11.2f} | "
              f"{row['length']:>8.1f}")
    if args.render:
        path = Path(args.run) / f"episode_T{config.eval.temperatures[0]}.gif"
        params, obs_stats = jax.tree.map(lambda x: x[0], (state.params, state.normalizer.obs))
        episode = jax.jit(evaluator.record)(params, obs_stats, jax.random.fold_in(eval_key, 1),
                                            config.eval.temperatures[0])
        render_gif(env, env_params, jax.device_get(episode), path)
        print(f"wrote {path}")
    return table


def render_gif(env, env_params, episode, path: Path) -> None:
    """Draws a recorded episode (host arrays) with gymnax's Visualizer, up to its end.

    Args:
        env: the unwrapped env (`make_env`'s).
        env_params: its params.
        episode: the `Episode` of `Evaluator.record`, on the host: states `[T, ...]`,
            rewards and dones `[T]`.
        path: the GIF to write.
    """
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # no display: else SDL complains per frame
    # matplotlib and gymnax's renderer: for a GIF only
    import matplotlib

    matplotlib.use("Agg")
    import jax
    import numpy as np
    from gymnax.visualize import Visualizer

    dones = np.asarray(episode.dones)
    length = int(np.argmax(dones)) + 1 if dones.any() else len(dones)
    states = [jax.tree.map(lambda x, t=t: x[t], episode.states) for t in range(length)]
    returns = np.cumsum(np.asarray(episode.rewards)[:length])
    Visualizer(env, env_params, states, returns).animate(str(path))


def main() -> None:
    """`python -m purerl.evaluate`."""
    run_command(__doc__, parse_args, evaluate_run)


if __name__ == "__main__":
    main()
