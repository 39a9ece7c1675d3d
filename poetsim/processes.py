"""Child processes that never outlive their parent: the sweep's workers and the HiGHS process alike.

Both kinds of child run long solves; a parent killed without a chance to clean up (SIGKILL, out
of memory) must not leave them running, so each child arms this itself as it starts. It sits
at the bottom of the layers because the optimiser and the sweeps both need it.
"""

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """End this process when `parent_pid` ends: PR_SET_PDEATHSIG on Linux, and a watchdog everywhere."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent ended before the death signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="poetsim-parent-watchdog", daemon=True).start()
