"""Clean stops: SIGTERM/SIGINT become a stop request; a second one falls back to the default (hard) behaviour."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals(on_stop: Callable[[int], None], *, ignore_repeats: bool = False) -> Iterator[None]:
    """Within the block, the first SIGTERM/SIGINT calls on_stop(signum).

    A repeated signal then acts as it would without us (a hard stop), or is ignored with ignore_repeats (a
    supervisor whose stop is already bounded). Outside the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(signum: int, _frame: FrameType | None) -> None:
        for sig in STOP_SIGNALS:
            if ignore_repeats:
                signal.signal(sig, signal.SIG_IGN)
            else:
                signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)
        on_stop(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
