"""The compiled programs of a process's latest runs, kept by what they depend on, so that the
jobs of a Hydra sweep whose settings differ only in the programs' arguments share them.

`purerl.train` makes one before it checks the settings: this module imports JAX (through
`purerl.runs.compiling`) only when a run asks for its programs.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Tuple

from purerl.config import Config

if TYPE_CHECKING:  # JAX's: after the settings are checked
    from purerl.runs.compiling import Programs

log = logging.getLogger("purerl")


class ProgramCache:
    """The compiled programs of a process's latest runs, by what they depend on, at most
    `keep` of them: a run that was given the same objects from Python (`Program.given`) and
    whose settings differ from a kept one's only in what the programs take as arguments runs
    that one's programs (`compile_s` 0). PPO's programs take the seed and the hyperparameters'
    values as arguments (`schedules.program_settings`); a user's algorithm may read any setting
    as a Python number, so its programs are kept for its whole config. A Hydra sweep's jobs
    share one.

    Args:
        keep: how many runs' programs to keep.
        on_compiled: called once a run's init and chunk programs are ready (compiled or
            reused).
    """

    def __init__(self, keep: int = 4, on_compiled: Callable[[], None] = lambda: None):
        self.keep, self.on_compiled = keep, on_compiled
        # program settings -> (the objects given from Python, the Programs)
        self._programs: "OrderedDict[str, Tuple[tuple, Programs]]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._programs)

    def programs_for(self, config: Config, program, key) -> Programs:
        """The run's programs: a kept run's when only the seed or hyperparameters differ; else
        compiled, the libraries the run's files are written with imported meanwhile.

        Args:
            config: the run's validated config.
            program: its `purerl.parallel.program.Program` (`make_program`).
            key: the run's typed PRNG key, whose shape and type the programs are lowered for.

        Returns:
            The `Programs`; `on_compiled` has been called.
        """
        # compiling imports JAX, and this module is imported before the settings are checked
        from purerl.runs.compiling import compile_programs, import_writers

        settings = _program_key(config, program)
        kept = self._programs.get(settings)
        if kept is not None and _same(kept[0], program.given):
            self._programs.move_to_end(settings)
            log.info("an earlier job's programs: only the seed or hyperparameters differ")
            programs = kept[1].reused()
        else:
            programs = compile_programs(config, program, key,
                                        meanwhile=lambda: import_writers(config))
            log.info("compiled in %.1f s", programs.compile_s)
            self._programs[settings] = (program.given, programs)
            self._programs.move_to_end(settings)
            if len(self._programs) > self.keep:
                self._programs.popitem(last=False)
        self.on_compiled()
        return programs


def _program_key(config: Config, program) -> str:
    """The settings a run's programs depend on, as a key: for PPO (`make_ppo`) the config
    without what its programs take as arguments (`schedules.program_settings`); for a user's
    algorithm, which may read any setting as a Python number, the whole config."""
    # PPO's and the schedules' modules import JAX: once a run asks for its programs
    from purerl.algos.ppo import make_ppo
    from purerl.core.schedules import program_settings

    algorithm = program.given[0]
    return repr(program_settings(config) if algorithm is make_ppo else config)


def _same(given: tuple, other: tuple) -> bool:
    """Whether two runs were given the same objects from Python (network, loss terms, ...)."""
    return len(given) == len(other) and all(a is b for a, b in zip(given, other))
