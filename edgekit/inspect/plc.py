"""The reject signal: tell the PLC to kick a failed part off the belt when it reaches the ejector.

A part is judged where it crosses the camera's line; the ejector sits further down the belt, so the
signal waits ``delay`` seconds (camera-to-ejector distance over belt speed, :func:`belt_delay`) from
the crossing frame's capture time. Outputs:

- :class:`ModbusOutput`: a Modbus TCP coil (set, then cleared after ``pulse`` seconds) or holding
  register (written ``value``, then 0) through pymodbus (the ``plc`` extra);
- :class:`GpioOutput`: a pulse on a GPIO pin through gpiozero (on a Raspberry Pi).

The :class:`Rejector` runs them on its own thread from a queue, so the detection loop never waits
on a PLC: :meth:`Rejector.reject` returns at once. A write that fails is retried every
``retry_interval`` seconds until ``give_up_after`` seconds past its due time, and every attempt
and outcome is reported through ``on_report`` (the cell turns reports into events and metrics)::

    out = ModbusOutput(ModbusTarget("192.168.0.10", coil=3))
    with Rejector([out], delay=belt_delay(distance_m=0.6, speed_mps=0.25), on_report=print) as rejector:
        rejector.reject(verdict.sequence, verdict.track_id, verdict.captured_at)
"""

from __future__ import annotations

import collections
import enum
import heapq
import itertools
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, Sequence

from edgekit.errors import ConfigError, EdgekitError
from edgekit.ranges import NONNEG_NUM, PORT, POS_NUM, between, check_ranges, ranged

__all__ = ["GpioOutput", "ModbusOutput", "ModbusTarget", "PlcError", "RejectOutput", "RejectReport",
           "Register", "ReportKind", "Rejector", "belt_delay"]

MAX_ADDRESS = 65535  # Modbus addresses coils and registers with 16 bits


class PlcError(EdgekitError):
    """The PLC or GPIO output cannot be reached or refuses the configured address."""


def belt_delay(distance_m: float, speed_mps: float) -> float:
    """Seconds a part takes from the camera's line to the ejector.

    Raises:
        ConfigError: a distance below 0 or a speed not above 0.
    """
    if distance_m < 0 or not speed_mps > 0:
        raise ConfigError(f"the reject delay needs distance >= 0 and belt speed > 0, got {distance_m} m and "
                          f"{speed_mps} m/s")
    return distance_m / speed_mps


class Register(str, enum.Enum):
    COIL = "coil"
    HOLDING = "register"


@dataclass(frozen=True)
class ModbusTarget:
    """Where the reject goes: a coil (``kind=COIL``) or holding register at ``address`` of unit ``unit``.

    Raises:
        ConfigError: an address, port, unit or value out of range.
    """

    host: str
    address: int = ranged(0, between(0, MAX_ADDRESS, f"a Modbus address 0..{MAX_ADDRESS} (a coil or register "
                                                     "number, from 0)"))
    kind: Register = Register.COIL
    port: int = ranged(502, PORT)
    unit: int = ranged(1, between(0, 247, "a Modbus unit id 0..247"))  # the Modbus device id
    value: int = ranged(1, between(0, 65535, "a register value 0..65535"))  # what a register is set to (a coil: True)
    pulse: float = ranged(0.5, NONNEG_NUM)  # seconds before the coil/register is cleared again (0: leave it set)
    timeout: float = ranged(1.0, POS_NUM)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Register(self.kind))
        check_ranges(self, f"modbus {self.kind.value}")

    def describe(self) -> str:
        return f"modbus://{self.host}:{self.port} unit {self.unit} {self.kind.value} {self.address}"


class RejectOutput(Protocol):
    """One way of signalling a reject: ``check`` at start, ``set``/``clear`` the signal, ``close``."""

    name: str
    pulse: float

    def check(self) -> None: ...

    def set(self) -> None: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


class ModbusOutput:
    """A coil or holding register on a Modbus TCP server (a PLC), through pymodbus' sync client."""

    def __init__(self, target: ModbusTarget) -> None:
        try:
            from pymodbus.client import ModbusTcpClient
        except ImportError:
            raise PlcError("Modbus rejects need pymodbus: pip install 'edgekit-tflite[plc]'") from None
        self.target, self.name, self.pulse = target, target.describe(), target.pulse
        self._client = ModbusTcpClient(target.host, port=target.port, timeout=target.timeout, retries=0)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from pymodbus.exceptions import ModbusException

        try:
            if not self._client.connected and not self._client.connect():
                raise PlcError(f"cannot connect to the PLC at {self.target.host}:{self.target.port}")
            response = fn(*args, device_id=self.target.unit, **kwargs)
        except ModbusException as exc:
            self._client.close()
            raise PlcError(f"{self.name}: {what} failed: {exc}") from None
        if response.isError():
            raise PlcError(f"{self.name}: the PLC refused to {what} ({response}); check the address and unit")
        return response

    def check(self) -> None:
        """Read the coil/register once: the PLC answers and has the address (nothing is written).

        Raises:
            PlcError: the PLC cannot be reached or refuses the address.
        """
        if self.target.kind is Register.COIL:
            self._call("read the coil", self._client.read_coils, self.target.address, count=1)
        else:
            self._call("read the register", self._client.read_holding_registers, self.target.address, count=1)

    def _write(self, on: bool) -> None:
        t = self.target
        if t.kind is Register.COIL:
            self._call("write the coil", self._client.write_coil, t.address, on)
        else:
            self._call("write the register", self._client.write_register, t.address, t.value if on else 0)

    def set(self) -> None:
        self._write(True)

    def clear(self) -> None:
        self._write(False)

    def close(self) -> None:
        self._client.close()


class GpioOutput:
    """A GPIO pin driven high (or low, ``active_high=False``) for ``pulse`` seconds through gpiozero.

    ``pin_factory``: gpiozero's pin factory (tests pass ``gpiozero.pins.mock.MockFactory()``).

    Raises:
        PlcError: gpiozero is missing or the pin cannot be opened.
    """

    def __init__(self, pin: int | str, *, pulse: float = 0.1, active_high: bool = True,
                 pin_factory: Any = None) -> None:
        try:
            from gpiozero import DigitalOutputDevice
        except ImportError:
            raise PlcError("GPIO rejects need gpiozero: pip install 'edgekit-tflite[gpio]' (Raspberry Pi OS has "
                           "it)") from None
        try:
            self.device = DigitalOutputDevice(pin, active_high=active_high, initial_value=False,
                                              pin_factory=pin_factory)
        except Exception as exc:  # gpiozero raises its own families (BadPinFactory, PinInvalidPin, ...)
            raise PlcError(f"cannot open GPIO pin {pin!r}: {exc}") from None
        self.name, self.pulse = f"gpio {pin}", pulse

    def check(self) -> None:
        pass  # opening the pin was the check

    def set(self) -> None:
        self.device.on()

    def clear(self) -> None:
        self.device.off()

    def close(self) -> None:
        self.device.close()


class ReportKind(str, enum.Enum):
    WRITTEN = "written"  # the reject signal was set
    RETRY = "retry"  # a write failed; it will be tried again
    FAILED = "failed"  # given up: the part passed the ejector unrejected
    DROPPED = "dropped"  # the queue was full


class RejectReport(NamedTuple):
    """One attempt or outcome of a reject; ``latency_ms``: crossing-frame capture to the write."""

    kind: ReportKind
    output: str
    sequence: int
    track_id: int
    attempts: int
    latency_ms: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"result": self.kind.value, "output": self.output, "part": self.sequence, "track_id": self.track_id,
                "attempts": self.attempts, "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 3),
                "error": self.error}


class _Job(NamedTuple):
    output: RejectOutput
    sequence: int
    track_id: int
    captured_at: float
    due: float
    ticks: int | None = None  # with an encoder: the count at which it is due (``due`` is set then)


POLL = 0.001  # seconds between looks at the encoder while a reject waits for ticks


_IDLE: Any = object()


class Rejector:
    """Signals rejects on a background thread, each ``delay`` seconds after its crossing frame.

    Args:
        outputs: where each reject goes (all of them).
        delay: seconds from the crossing frame's capture (``time.perf_counter()``) to the signal.
        retry_interval, give_up_after: a failed write is tried again every ``retry_interval`` s until
            ``give_up_after`` s past its due time.
        on_report: called on the rejector's thread with every :class:`RejectReport`.
        check: check every output when starting (raises :class:`PlcError` when one is unreachable).
        encoder, delay_ticks: count the delay in belt travel instead: the signal goes out once the
            encoder (:class:`edgekit.inspect.encoder.Encoder`) has counted ``delay_ticks`` more ticks
            than at the crossing frame's capture (a stopped belt holds the reject back; at close, a
            reject still waiting gets ``give_up_after`` s more, then is reported FAILED).
    """

    def __init__(self, outputs: Sequence[RejectOutput], *, delay: float = 0.0, retry_interval: float = 0.2,
                 give_up_after: float = 5.0, on_report: Callable[[RejectReport], None] | None = None,
                 check: bool = True, max_queue: int = 1000, encoder: Any = None,
                 delay_ticks: int | None = None) -> None:
        if delay < 0 or not retry_interval > 0 or give_up_after < 0:
            raise ConfigError(f"delay and give_up_after must be >= 0 s and retry_interval > 0 s; got {delay}, "
                              f"{give_up_after}, {retry_interval}")
        if (encoder is None) != (delay_ticks is None) or (delay_ticks is not None and (delay_ticks < 0 or delay)):
            raise ConfigError("a delay in encoder ticks needs an encoder and delay_ticks >= 0 (and no delay in "
                              f"seconds); got encoder={encoder!r}, delay_ticks={delay_ticks!r}, delay={delay!r}")
        self.encoder, self.delay_ticks = encoder, delay_ticks
        self.outputs, self.delay = list(outputs), delay
        self.retry_interval, self.give_up_after = retry_interval, give_up_after
        self.on_report = on_report
        self.latencies_ms: collections.deque[float] = collections.deque(maxlen=10000)
        self.counts = {kind: 0 for kind in ReportKind}
        self.last: RejectReport | None = None  # the newest attempt or outcome
        self._check = check
        self._inbox: queue.Queue[_Job | None] = queue.Queue(max_queue)
        self._thread: threading.Thread | None = None
        self._order = itertools.count()

    @property
    def queued(self) -> int:
        """Rejects accepted and not yet written (waiting for their delay or a retry)."""
        return self._inbox.qsize()

    def start(self) -> Rejector:
        """Check the outputs (unless ``check=False``) and start the thread.

        Raises:
            PlcError: an output cannot be reached or refuses its address.
        """
        if self._thread is None:
            if self._check:
                for out in self.outputs:
                    out.check()
            self._thread = threading.Thread(target=self._run, name="edgekit-reject", daemon=True)
            self._thread.start()
        return self

    def reject(self, sequence: int, track_id: int, captured_at: float) -> bool:
        """Queue a reject for a part whose crossing frame was captured at ``captured_at``
        (``time.perf_counter()``); never blocks. False (and a DROPPED report) when the queue is full."""
        ok = True
        ticks = None if self.encoder is None else self.encoder.count_at(captured_at) + self.delay_ticks
        for out in self.outputs:
            try:
                self._inbox.put_nowait(_Job(out, sequence, track_id, captured_at, captured_at + self.delay, ticks))
            except queue.Full:
                self._report(RejectReport(ReportKind.DROPPED, out.name, sequence, track_id, 0,
                                          error="the reject queue is full: the PLC has not answered for a while"))
                ok = False
        return ok

    def _report(self, report: RejectReport) -> None:
        self.counts[report.kind] += 1
        self.last = report
        if report.latency_ms is not None:
            self.latencies_ms.append(report.latency_ms)
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:  # a broken reporter must not stop the rejects
                pass

    def _run(self) -> None:
        # (when, order, action, job, attempts); action "set" writes the signal, "clear" ends its pulse
        pending: list[tuple[float, int, str, _Job, int]] = []
        waiting: list[tuple[int, int, _Job]] = []  # (due count, order, job): rejects waiting for encoder ticks
        stopping, stop_at = False, 0.0
        while not stopping or pending or waiting:
            if waiting:
                self._due_by_ticks(waiting, pending, stopping and time.perf_counter() > stop_at + self.give_up_after)
            wait = max(0.0, pending[0][0] - time.perf_counter()) if pending else None
            if waiting:
                wait = POLL if wait is None else min(wait, POLL)
            if stopping:
                time.sleep(wait or 0.0)  # what is queued still goes out: a failed part is still kicked
            else:
                try:
                    job = self._inbox.get(timeout=wait)
                except queue.Empty:
                    job = _IDLE
                if job is None:
                    stopping, stop_at = True, time.perf_counter()
                    continue
                if job is not _IDLE and job.ticks is not None:
                    heapq.heappush(waiting, (job.ticks, next(self._order), job))
                    continue
                if job is not _IDLE:
                    heapq.heappush(pending, (job.due, next(self._order), "set", job, 0))
                    continue
            if pending and pending[0][0] <= time.perf_counter():
                _, _, action, job, attempts = heapq.heappop(pending)
                self._act(pending, action, job, attempts + 1)

    def _due_by_ticks(self, waiting: list[tuple[int, int, _Job]], pending: list[Any], give_up: bool) -> None:
        """Move the rejects whose tick count the encoder has reached to ``pending``, due now (or, with
        ``give_up``, report every one still waiting as FAILED)."""
        count, now = self.encoder.count, time.perf_counter()
        while waiting and (waiting[0][0] <= count or give_up):
            target, _, job = heapq.heappop(waiting)
            if target <= count:
                heapq.heappush(pending, (now, next(self._order), "set", job._replace(due=now), 0))
            else:
                self._report(RejectReport(ReportKind.FAILED, job.output.name, job.sequence, job.track_id, 0,
                                          error=f"the encoder was {target - count} ticks short of the ejector "
                                                "when the rejector closed (the belt stopped?)"))

    def _act(self, pending: list[Any], action: str, job: _Job, attempts: int) -> None:
        out = job.output
        try:
            out.set() if action == "set" else out.clear()
        except Exception as exc:  # PlcError, or an unexpected failure of a driver: retried alike
            now = time.perf_counter()
            error = str(exc) or type(exc).__name__
            if now + self.retry_interval <= job.due + self.give_up_after:
                heapq.heappush(pending, (now + self.retry_interval, next(self._order), action, job, attempts))
                self._report(RejectReport(ReportKind.RETRY, out.name, job.sequence, job.track_id, attempts,
                                          error=error))
            else:
                what = "" if action == "set" else "clearing the signal after the pulse: "
                self._report(RejectReport(ReportKind.FAILED, out.name, job.sequence, job.track_id, attempts,
                                          error=what + error))
            return
        if action == "set":
            done = time.perf_counter()
            self._report(RejectReport(ReportKind.WRITTEN, out.name, job.sequence, job.track_id, attempts,
                                      latency_ms=(done - job.captured_at) * 1e3))
            if out.pulse > 0:
                heapq.heappush(pending, (done + out.pulse, next(self._order), "clear", job, 0))

    def close(self, timeout: float | None = None) -> None:
        """Send the rejects still queued (each when due) and end their pulses, stop the thread, close
        the outputs. Waits at most ``timeout`` s (default: what the queued rejects need). Safe twice."""
        if timeout is None:
            timeout = self.delay + self.give_up_after * (2 if self.encoder else 1) + max(
                [o.pulse for o in self.outputs], default=0) + 1
        if self._thread is not None:
            try:
                self._inbox.put(None, timeout=timeout)
            except queue.Full:
                pass
            self._thread.join(timeout)
            self._thread = None
        for out in [*self.outputs, *([self.encoder] if self.encoder is not None else [])]:
            try:
                out.close()
            except Exception:
                pass
        self.outputs, self.encoder = [], None

    def __enter__(self) -> Rejector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
