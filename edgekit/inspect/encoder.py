"""A belt encoder: the reject delay in belt travel (encoder ticks) instead of seconds.

A belt that slows down, stops or speeds up carries the part to the ejector in another time, but in
the same number of encoder ticks. :class:`Encoder` counts ticks and remembers when each came (the
``time.perf_counter()`` clock the loop stamps frames with), so :meth:`Encoder.count_at` tells how
far the belt had gone when the crossing frame was captured, even though the verdict is made a few
milliseconds later. :class:`GpioEncoder` counts the pulses of an encoder wired to a GPIO pin
through gpiozero (tests drive gpiozero's mock pins); anything else calls :meth:`Encoder.tick`::

    encoder = GpioEncoder(27)
    rejector = Rejector([GpioOutput(17)], encoder=encoder, delay_ticks=480)   # 480 ticks line -> ejector
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from edgekit.errors import ConfigError
from edgekit.inspect.plc import PlcError

__all__ = ["Encoder", "GpioEncoder"]


class Encoder:
    """Counts belt encoder ticks with their times; thread-safe (ticks come on another thread).

    ``history``: how many recent tick times are kept to answer :meth:`count_at` (older moments are
    answered with the oldest kept count: keep more than the ticks a part takes from line to ejector).
    """

    def __init__(self, *, history: int = 100_000) -> None:
        if history < 1:
            raise ConfigError(f"the encoder's history must keep at least 1 tick, got {history}")
        self._times: collections.deque[float] = collections.deque(maxlen=history)
        self._count = 0
        self._lock = threading.Lock()
        self.name = "encoder"

    def tick(self, n: int = 1, at: float | None = None) -> None:
        """``n`` ticks, at ``at`` (``time.perf_counter()``; default now)."""
        when = time.perf_counter() if at is None else at
        with self._lock:
            self._count += n
            self._times.extend([when] * n)

    @property
    def count(self) -> int:
        """Ticks so far."""
        return self._count

    def count_at(self, moment: float) -> int:
        """The count at ``moment`` (``time.perf_counter()``): the ticks that came at or before it."""
        later = 0  # ticks after ``moment``: a few, counted from the newest (this runs on the loop's thread)
        with self._lock:
            for when in reversed(self._times):
                if when <= moment:
                    break
                later += 1
            return self._count - later

    def close(self) -> None:
        pass


class GpioEncoder(Encoder):
    """An encoder's pulse output on a GPIO pin: one tick per rising edge (``edge="rising"``), per
    falling edge, or per both; through gpiozero (``pin_factory``: tests pass its MockFactory).

    Raises:
        PlcError: gpiozero is missing or the pin cannot be opened.
        ConfigError: ``edge`` is not rising, falling or both.
    """

    def __init__(self, pin: int | str, *, edge: str = "rising", pull_up: bool = False, pin_factory: Any = None,
                 history: int = 100_000) -> None:
        super().__init__(history=history)
        if edge not in ("rising", "falling", "both"):
            raise ConfigError(f"encoder edge must be 'rising', 'falling' or 'both', got {edge!r}")
        try:
            from gpiozero import DigitalInputDevice
        except ImportError:
            raise PlcError("a GPIO encoder needs gpiozero: pip install 'edgekit-tflite[gpio]' (Raspberry Pi OS "
                           "has it)") from None
        try:
            self.device = DigitalInputDevice(pin, pull_up=pull_up, pin_factory=pin_factory)
        except Exception as exc:  # gpiozero raises its own families (BadPinFactory, PinInvalidPin, ...)
            raise PlcError(f"cannot open GPIO pin {pin!r} for the encoder: {exc}") from None
        if edge in ("rising", "both"):
            self.device.when_activated = self._edge
        if edge in ("falling", "both"):
            self.device.when_deactivated = self._edge
        self.name = f"encoder on gpio {pin}"

    def _edge(self, *_: Any) -> None:
        self.tick()

    def close(self) -> None:
        self.device.close()
