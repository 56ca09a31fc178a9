"""The `edgekit` console script (and `python -m edgekit`): Ctrl-C while the CLI itself is still loading
ends as it does later, "interrupted", exit 130, no traceback (edgekit.cli.main covers the rest).

A SIGINT that lands while Python runs a callback it cannot raise from (a lock's weakref callback
inside an import) would print "Exception ignored ... KeyboardInterrupt" and be lost; the hook
below delivers it again, where the CLI catches it.

The cyclic garbage collector is off while the command loads, and what the imports made is frozen
once they are done (:func:`_settle_heap`): a setting of the whole process, so the console script
makes it, never the library or :func:`edgekit.cli.main` called from other code.
"""

from __future__ import annotations

import _signal
import os


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C before :func:`main` runs (the console script's own imports, edgekit's package):
    nothing is open or written yet, so the process ends at once, as it would later."""
    os.write(2, b"edgekit: interrupted\n")
    os._exit(130)


if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # not one the caller set
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)

import gc  # noqa: E402 - after the handler: a Ctrl-C from here on is answered in one line
import sys  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _redeliver_interrupts(hook: Any) -> Any:
    def unraisable(u: Any) -> None:
        if isinstance(u.exc_type, type) and issubclass(u.exc_type, KeyboardInterrupt):
            import _thread

            # Marks SIGINT as arrived without running its handler here (signal.raise_signal would, inside
            # this hook): it runs at the main thread's next check, in ordinary code.
            _thread.interrupt_main()
            return
        hook(u)

    return unraisable


def _settle_heap() -> None:
    """Called once the command's modules are imported: what the imports made (modules, classes,
    functions, numpy's and OpenCV's tables: some 43,000 objects for `detect`) lives as long as the
    process, and the collector would walk it again at each of its passes (some 60 while `detect`
    loads) and at exit. Frozen, it is left out of every later pass (gc.freeze), and the collector,
    off until now, runs on what the command makes from here on: the loop's frames, results and
    cycles are collected as before. For a detect of one photo that walking was 10-25 ms of 265."""
    gc.freeze()
    gc.enable()


def main() -> int:
    if _signal.getsignal(_signal.SIGINT) is _interrupted_while_starting:  # from here on, KeyboardInterrupt
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)  # is caught and said below and by the CLI
    sys.unraisablehook = _redeliver_interrupts(sys.unraisablehook)
    gc.disable()  # until _settle_heap: nothing the imports make is garbage worth a pass
    try:
        try:
            from edgekit.cli import main as cli_main
        except KeyboardInterrupt:
            print("edgekit: interrupted", file=sys.stderr)
            return 130
        return cli_main(loaded=_settle_heap)
    finally:
        gc.enable()  # where the command ended before it was loaded (else it is on already)
