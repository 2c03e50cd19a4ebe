"""Progress on the console: the log line of an update, a tqdm bar over env steps (tqdm is
imported when a bar is made), and the log's lines on stderr where logging is not set up."""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Dict, Iterator, Optional, TextIO

from tqdm import tqdm

# Beside a return from an earlier update; the log says what it means once.
EARLIER = "*"
EARLIER_NOTE = (f"{EARLIER} no episode ended in that update: the return of the latest update "
                "in which one did")


def return_text(value: Optional[float], earlier: bool, width: int = 0) -> str:
    """A return for the console: `94.6`, `500.0*` when it is an earlier update's, `n/a`.

    Args:
      value: the return, None when no episode has ended yet.
      earlier: whether it is an earlier update's (none ended in this one).
      width: the width of the number (right-aligned), the marker's column after it.

    Returns:
      The text: the number, then the marker or a space where `width` is given.
    """
    pad = " " if width else ""  # the marker's column, in a line of aligned columns
    if value is None:
        return f"{'n/a':>{width}}{pad}"
    return f"{value:{width}.1f}{EARLIER if earlier else pad}"


def progress_line(row: Dict, num_updates: int, sps: float,
                  latest_return: Optional[float] = None) -> str:
    """The console line of one update.

    Args:
      row: a `metrics_rows` dict (`update`, `env_steps`, `episode_return`).
      num_updates: the run's number of updates.
      sps: env steps per second.
      latest_return: the return of the latest update in which an episode ended
        (`RunHistory.latest_return`), shown marked when none ended in this one.

    Returns:
      `update 32/39 | env steps      16,384 | return     94.6  |     37,792 steps/s`, or
        `... | return    500.0* | ...` when the return is an earlier update's.
    """
    own = row["episode_return"]
    ret = return_text(latest_return if own is None else own,
                      own is None and latest_return is not None, width=8)
    return (f"update {row['update']:>{len(str(num_updates))}}/{num_updates} | env steps "
            f"{row['env_steps']:>11,} | return {ret} | {sps:>10,.0f} steps/s")


def _si(x: float) -> str:
    """12345 -> "12.3k", 1.5e6 -> "1.50M" (three significant digits)."""
    for unit in ("", "k", "M", "G"):
        if abs(x) < 999.5:
            return f"{x:.3g}{unit}" if abs(x) < 1 or unit else f"{x:.0f}"
        x /= 1000.0
    return f"{x:.3g}T"


class ProgressBar:
    """A tqdm bar over env steps (per seed) to `file` (stderr), or nothing when not `enabled`.

    `initial` is the resumed position, so the rate and ETA count only the steps of this run.
    """

    def __init__(self, total_steps: int, enabled: bool = True, initial: int = 0,
                 file: Optional[TextIO] = None):
        self._bar = None
        if enabled:

            self._bar = tqdm(total=int(total_steps), initial=int(initial), unit="steps",
                             unit_scale=True, dynamic_ncols=True, mininterval=1.0,
                             bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}"
                                        "{postfix}]",
                             file=sys.stderr if file is None else file)

    @property
    def position(self) -> Optional[int]:
        """The bar's current env steps; None when disabled."""
        return None if self._bar is None else int(self._bar.n)

    def update(self, env_steps: int, sps: float, latest_return: Optional[float],
               earlier: bool = False) -> None:
        """Moves the bar to `env_steps` (absolute) with a postfix of `sps` and the latest
        return, marked when `earlier` (an earlier update's: none ended in this one).

        Args:
            env_steps: env steps per seed so far.
            sps: env steps per second.
            latest_return: the return to show, None before any episode ended.
            earlier: the return is an earlier update's.
        """
        if self._bar is None:
            return
        ret = return_text(latest_return, earlier)
        self._bar.set_postfix_str(f"{_si(sps)} steps/s, return {ret}", refresh=False)
        self._bar.update(int(env_steps) - self._bar.n)

    def close(self) -> None:
        """Closes the bar; nothing when disabled or closed."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


# The command line's log format (Hydra's default `job_logging`).
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"


@contextlib.contextmanager
def console_log(enabled: bool = True, name: str = "purerl") -> Iterator[None]:
    """The `name` logger's lines from INFO up (or from its own level, where one is set) on
    stderr, as the command line shows them, while the context lasts: only when `enabled` and
    logging is not set up (no handler on that logger or above it, as Hydra's job logging or
    `logging.basicConfig` sets). Nothing is left changed afterwards.

    Args:
        enabled: False leaves logging alone.
        name: the logger.

    Yields:
        None, while the lines show.
    """
    logger = logging.getLogger(name)
    if not enabled or logger.hasHandlers():
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(level or logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
