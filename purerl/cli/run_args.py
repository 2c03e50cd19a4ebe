"""The command lines that read a run directory (`purerl.evaluate`, `purerl.export`): their
`key=value` arguments into a dataclass with a `run` field, checked without JAX, and their
`main`: `--help`, one-line errors, exit codes."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Callable, List, Type, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from purerl.config import ConfigError
from purerl.storage.write_errors import WriteError

Args = TypeVar("Args")


def parse_run_args(argv: List[str], schema: Type[Args]) -> Args:
    """`key=value` words into a `schema` dataclass (types checked, as Hydra's overrides are),
    its `run` an existing directory.

    Args:
        argv: the words after the command.
        schema: a dataclass with defaults for every field, `run` among them.

    Returns:
        The `schema` instance.

    Raises:
        ConfigError: one line naming an unknown key, a value of the wrong type, or `run`.
    """
    names = [f.name for f in dataclasses.fields(schema)]
    for arg in argv:
        key = arg.split("=", 1)[0]
        if "=" not in arg or key not in names:
            raise ConfigError(f"unknown argument {arg!r}: expected key=value with key one of "
                              f"{', '.join(names)}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.from_dotlist(argv))
        args = OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        reason = str(getattr(error, "msg", error)).splitlines()[0]
        key = getattr(error, "full_key", None)
        raise ConfigError(f"{key}: {reason}" if key else reason) from None
    if not args.run:
        raise ConfigError("pass run=<run directory>")
    if not Path(args.run).is_dir():
        raise ConfigError(f"run={args.run}: no such directory")
    return args


def run_command(doc: str, parse: Callable[[List[str]], Args],
                command: Callable[[Args], object]) -> None:
    """A command line's `main`: `-h` or `--help` prints `doc`; else `command(parse(argv))`,
    a ConfigError one line on stderr and exit code 2, a WriteError one line and exit code 1.

    Args:
        doc: the command's help text (its module's docstring).
        parse: the arguments' parser (`parse_args` of the command's module).
        command: what the command does with the parsed arguments.
    """
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(doc.strip())
        return
    try:
        command(parse(sys.argv[1:]))
    except ConfigError as error:
        print(f"purerl: error: {error}", file=sys.stderr)
        sys.exit(2)
    except WriteError as error:
        print(f"purerl: error: {error}", file=sys.stderr)
        sys.exit(1)
