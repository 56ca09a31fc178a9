"""The `edgekit` console script (and `python -m edgekit`): Ctrl-C while the CLI itself is still loading
ends as it does later, "interrupted", exit 130, no traceback (edgekit.cli.main covers the rest).

A SIGINT that lands while Python runs a callback it cannot raise from (a lock's weakref callback
inside an import) would print "Exception ignored ... KeyboardInterrupt" and be lost; the hook
below delivers it again, where the CLI catches it.
"""

from __future__ import annotations

import sys
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


def main() -> int:
    sys.unraisablehook = _redeliver_interrupts(sys.unraisablehook)
    try:
        from edgekit.cli import main as cli_main
    except KeyboardInterrupt:
        print("edgekit: interrupted", file=sys.stderr)
        return 130
    return cli_main()
