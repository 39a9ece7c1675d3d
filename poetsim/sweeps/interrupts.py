"""Stop requests: SIGINT and SIGTERM, while long work runs, ask it to stop instead of killing it.

A sweep that is killed outright loses the rows its workers finished and leaves them running;
asked instead, it writes what is finished, ends its workers and says how far it got.
"""

import signal
import threading
from typing import Any


class StopRequest:
    """While a sweep runs, SIGINT and SIGTERM ask it to stop (`signum`) instead of killing it.

    The handler only notes the signal: the sweep looks at it between rows, so a row is never
    half-handled. Installed only in the main thread (Python delivers signals there), and not
    over a signal the caller ignores (`nohup`, a background job's SIGINT).
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._saved: dict[int, Any] = {}

    def _note(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum

    def __enter__(self) -> "StopRequest":
        """Take SIGINT and SIGTERM as stop requests (main thread only; an ignored signal stays ignored)."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(signum)
                if previous is not signal.SIG_IGN and previous is not None:  # None: a handler set outside Python
                    self._saved[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc) -> None:
        """Put back the handlers the block replaced."""
        for signum, previous in self._saved.items():
            signal.signal(signum, previous)
        self._saved.clear()
