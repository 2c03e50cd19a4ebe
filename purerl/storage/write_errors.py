"""A write that failed (a full disk or quota, a read-only, vanished or foreign directory, a
file too large): one error naming the path and the OS's reason, whichever library wrote it
(Python's files, matplotlib, tensorboardX, orbax and tensorstore)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import Iterator, Optional

# The OS errors that only a write raises (others count when they name a path in the run
# directory: no permission, a vanished directory, an I/O error)
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


class WriteError(RuntimeError):
    """A file of the run could not be written: `path` and the OS's reason."""

    def __init__(self, path, reason: str):
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.reason = path, reason


def write_error(error: BaseException, run_dir: Path) -> Optional[WriteError]:
    """`error` as a `WriteError` when it is a failed write in `run_dir`: an `OSError` of a
    write (a full disk, a read-only or vanished directory, no permission), or orbax's and
    tensorstore's error that carries one; None for any other error.

    Args:
        error: the exception.
        run_dir: the run directory: an `OSError` on a path inside it counts whatever its errno.

    Returns:
        The `WriteError` (`error` itself when it is one), or None.
    """
    if isinstance(error, WriteError):
        return error
    if isinstance(error, OSError) and error.errno is not None:
        path = error.filename or run_dir
        inside = Path(os.path.abspath(path)).is_relative_to(os.path.abspath(run_dir))
        if error.errno in WRITE_ERRNOS or inside:
            return WriteError(path, error.strerror or os.strerror(error.errno))
        return None
    code = re.search(r"os_error_code='(\d+)'", str(error))
    if code:  # tensorstore's: the first file it names, and the OS error's code
        named = re.search(r'local file "([^"]+)"', str(error))
        return WriteError(named.group(1) if named else run_dir, os.strerror(int(code.group(1))))
    return None


@contextlib.contextmanager
def writes_to(run_dir: Path) -> Iterator[None]:
    """Within it, a failed write in `run_dir` raises `WriteError` (`write_error`).

    Args:
        run_dir: the run directory.

    Yields:
        None.

    Raises:
        WriteError: a write in `run_dir` failed inside the block (chained from the error).
    """
    try:
        yield
    except Exception as error:
        failed = write_error(error, run_dir)
        if failed is None or failed is error:
            raise
        raise failed from error


@contextlib.contextmanager
def writing(path) -> Iterator[None]:
    """Within it, an `OSError` raises `WriteError` naming `path`, the file being written.

    Args:
        path: the file (or directory) being written.

    Yields:
        None.

    Raises:
        WriteError: an `OSError` was raised inside the block.
    """
    try:
        yield
    except OSError as error:
        raise WriteError(path, error.strerror or str(error)) from None


@contextlib.contextmanager
def quiet_after_failure() -> Iterator[None]:
    """Within it, orbax's worker threads and coroutines print no tracebacks and its absl
    logger no errors; left so when the block fails (the run ends with its own one line),
    restored when it succeeds.

    Yields:
        None.
    """
    absl = logging.getLogger("absl")
    saved = (threading.excepthook, sys.unraisablehook, absl.level)
    threading.excepthook = lambda args: None
    sys.unraisablehook = lambda unraisable: None
    absl.setLevel(logging.CRITICAL)
    yield
    threading.excepthook, sys.unraisablehook = saved[:2]
    absl.setLevel(saved[2])
