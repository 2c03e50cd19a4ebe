"""The signals that stop a run cleanly: Ctrl-C (SIGINT), SIGTERM (what SLURM, Kubernetes,
`docker stop` and preemptible VMs send) and SIGUSR1 (what `sbatch --signal=USR1@120` sends
before a time limit). The first one asks the run to stop after the chunk in flight, once its
checkpoint is written; a second one of the same kind ends the process at once.
"""

from __future__ import annotations

import logging
import signal
from typing import Dict, Optional

log = logging.getLogger("purerl")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


def status_of(signum: int) -> str:
    """summary.json's `status` of a run stopped by `signum`: "interrupted" after Ctrl-C,
    "preempted" after SIGTERM or SIGUSR1.

    Args:
        signum: the signal's number.

    Returns:
        "interrupted" or "preempted".
    """
    return "interrupted" if signum == signal.SIGINT else "preempted"


def exit_code_of(signum: int) -> int:
    """The command's exit code after a run stopped by `signum`: 128 + its number, as a
    shell reports a process the signal ended (130 SIGINT, 143 SIGTERM, 138 SIGUSR1).

    Args:
        signum: the signal's number.

    Returns:
        `128 + signum`.
    """
    return 128 + int(signum)


class StopSignals:
    """While entered, the stop signals set `received` (the first one's number) instead of
    ending the process; the handlers before are restored on exit. Outside the main thread
    (where Python cannot handle signals) it does nothing."""

    def __init__(self):
        self.received: Optional[int] = None
        self._previous: Dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        try:
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread
            self.__exit__()
        return self

    def _handle(self, signum, frame) -> None:
        if self.received is None:
            self.received = signum
        signal.signal(signum, signal.SIG_DFL)  # the same signal again ends the process
        how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        log.warning("%s: stopping after this chunk, once its checkpoint is written (%s again "
                    "to exit at once)", signal.Signals(signum).name, how)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
