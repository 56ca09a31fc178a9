"""Helpers the subcommands share: argument types, aligned tables, progress, native log noise."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from typing import Any, Iterable, Iterator, Sequence

from edgekit.errors import InputError
from edgekit.runtimes.delegates import Delegate

__all__ = ["delegate_arg", "delegate_list_arg", "int_list_arg", "positive_int", "non_negative_int", "table", "progress",
           "native_stderr_filtered"]

_DELEGATES = ", ".join(repr(d.value) for d in Delegate)


def delegate_arg(text: str) -> str:
    """argparse type: one delegate ('auto', 'cpu', 'xnnpack', 'edgetpu', 'edgetpu:usb:1').

    Returns the normalized text; the enum is made by load_model. A bad value reads as an
    argparse invalid choice, so the parser offers "did you mean".
    """
    try:
        delegate, device = Delegate.parse(text)
    except InputError as exc:
        head = text.partition(":")[0]
        if head.strip().lower() in {d.value for d in Delegate}:
            raise argparse.ArgumentTypeError(str(exc)) from None  # a bad device, not a bad name
        raise argparse.ArgumentTypeError(f"invalid choice: {head!r} (choose from {_DELEGATES})") from None
    return delegate.value + (f":{device.option}" if device and device.option else "")


def delegate_list_arg(text: str) -> list[str]:
    """argparse type: a comma-separated list of delegates."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"give at least one delegate (one of {_DELEGATES})")
    return [delegate_arg(t) for t in items]


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number of at least {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _whole_number(text, 0)


def positive_float(text: str) -> float:
    """argparse type: a number above 0 (seconds, frames per second)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number between 0 and 1 (a score or IoU threshold)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text}")
    return value


def int_list_arg(text: str) -> list[int]:
    """argparse type: comma-separated positive integers, e.g. '1,2,4'."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas (e.g. 1,2,4), got {text!r}")
    return [positive_int(t) for t in items]


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[bool] | None = None,
          indent: str = "") -> str:
    """Rows as aligned text columns under a header and a rule."""
    body = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]
    align = right or [False] * len(headers)

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if a else c.ljust(w) for c, w, a in zip(cells, widths, align)]
        return (indent + "  ".join(parts)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in body)])


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def progress(total: int, desc: str, quiet: bool = False) -> Any:
    """A tqdm bar on stderr, or a do-nothing stand-in when quiet, not a TTY, or tqdm is absent."""
    if not quiet and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is optional on a device
            pass
        else:
            return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, unit="run")
    return _NoProgress()


class _NoProgress:
    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass


@contextlib.contextmanager
def native_stderr_filtered() -> Iterator[None]:
    """Drop the interpreter's "INFO: Created TensorFlow Lite XNNPACK delegate" lines, keep the rest.

    The C++ runtime writes them straight to file descriptor 2, where they would break the
    CLI's promise of one line per error. Everything else it writes is passed on.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded, redirected oddly): leave it alone
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not ln.startswith("INFO: ")]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
