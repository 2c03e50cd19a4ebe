"""Command line: `python -m purerl.export run=<run dir> [key=value ...]` (`--help`: this).

Writes one member's policy of a run's final (or `checkpoint=best`) checkpoint as one file that
runs without purerl: the network, the run's observation normalization and the action choice,
as `purerl.load(run).act` computes them, for any batch size B.

    run=<dir>            the run directory (required)
    checkpoint=final     final (the newest checkpoint) or best (checkpoint.best=true runs)
    member=null          which member (seed, or sweep point x seed); null: the best final return
    format=stablehlo     stablehlo: jax.export, serialized (jax and numpy load and run it);
                         onnx: for onnxruntime, through jax2onnx (pip install "purerl[export]")
    out=null             the file; null: <run>/policy.<format> (policy_T<temperature>.<format>
                         when sampling)
    temperature=0.0      0.0: the greedy action; above 0: sampled at that temperature from a
                         key input (stablehlo only)
    platforms=null       what a stablehlo file runs on, among cpu, cuda, rocm, tpu; null:
                         [cpu,cuda]

The file's function (docs/deploy.md):
    obs [B, *obs_shape] (as the env returns them) -> action [B, *action_shape]
    a recurrent policy: (obs, carry float32 [B, C], episode_start bool [B]) -> (action,
        next_carry); the carry is reset where episode_start is True (zeros at the first step)
    temperature > 0: one more input, key uint32 [2] (threefry2x32 key data; [0, seed] is
        jax.random.key(seed)): a new one at every call
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import List, Optional

from purerl.cli.run_args import parse_run_args, run_command
from purerl.config import ConfigError
from purerl.storage.write_errors import writes_to


@dataclasses.dataclass
class ExportArgs:
    run: str = ""
    checkpoint: str = "final"
    member: Optional[int] = None  # null: the member with the best final return
    format: str = "stablehlo"
    out: Optional[str] = None  # null: <run>/policy.<format>
    temperature: float = 0.0
    platforms: Optional[List[str]] = None  # stablehlo's; null: DEFAULT_PLATFORMS


def parse_args(argv: List[str]) -> ExportArgs:
    """`key=value` arguments into `ExportArgs`, `out` filled in and every setting checked
    (the run's checkpoint and member are checked when it loads); raises ConfigError.

    Args:
        argv: the arguments after `python -m purerl.export`.

    Returns:
        The `ExportArgs`.

    Raises:
        ConfigError: an unknown key, a bad value, a setting `check_settings` refuses, or an
            `out` that cannot be written.
    """
    # exporting imports JAX (0.5 s): after the command's arguments are parsed
    from purerl.storage.exporting import DEFAULT_PLATFORMS, SUFFIXES, check_settings

    args = parse_run_args(argv, ExportArgs)
    if args.checkpoint not in ("final", "best"):
        raise ConfigError(f"checkpoint={args.checkpoint} must be final or best")
    if args.platforms is not None and args.format != "stablehlo":
        raise ConfigError(f"platforms={args.platforms}: only format=stablehlo has platforms")
    check_settings(args.format, args.temperature,
                   DEFAULT_PLATFORMS if args.platforms is None else args.platforms)
    if args.out is None:
        stem = "policy" if args.temperature == 0 else f"policy_T{args.temperature}"
        args.out = str(Path(args.run) / (stem + SUFFIXES[args.format]))
    _check_writable(Path(args.out))
    return args


def _check_writable(out: Path) -> None:
    """Raises ConfigError naming `out=` when the file cannot be written there."""
    if out.is_dir():
        raise ConfigError(f"out={out}: is a directory")
    if not out.parent.is_dir():
        raise ConfigError(f"out={out}: no such directory {out.parent}")
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ConfigError(f"out={out}: cannot write there")


def export_run(args: ExportArgs) -> Path:
    """Loads the run's policy, writes it to `args.out` and prints what the file takes and
    returns; returns the file's path. Raises ConfigError, or WriteError when the write fails.

    Args:
        args: the parsed arguments (`parse_args`).

    Returns:
        The written file's path.

    Raises:
        ConfigError: the run has no intact checkpoint, or `member` is out of range.
        purerl.storage.write_errors.WriteError: the file could not be written.
    """
    # JAX, gymnax and the run's program (1 s): once the arguments are checked
    from purerl.storage.exporting import DEFAULT_PLATFORMS, export_policy, policy_signature
    from purerl.storage.trained import load

    policy = load(args.run, args.checkpoint, args.member)
    platforms = tuple(args.platforms or DEFAULT_PLATFORMS)
    data = export_policy(policy, args.format, args.temperature, platforms)
    out = Path(args.out)
    with writes_to(out.parent):
        out.write_bytes(data)
    signature = policy_signature(policy, args.temperature)
    where = f" for {', '.join(platforms)}" if args.format == "stablehlo" else ""
    print(f"wrote {out} ({len(data) / 1024:.1f} KiB, {args.format}{where}): "
          f"{policy.config.env.name}, checkpoint of update {policy.update} ({args.checkpoint}), "
          f"member {policy.member}, temperature {args.temperature}")
    print(f"  inputs:  {', '.join(map(str, signature.inputs))}")
    print(f"  outputs: {', '.join(map(str, signature.outputs))}")
    return out


def main() -> None:
    """`python -m purerl.export`."""
    run_command(__doc__, parse_args, export_run)


if __name__ == "__main__":
    main()
