"""Reject signals: a coil or register on pymodbus' own server, a GPIO pulse on gpiozero's mock pins,
an unreachable PLC retried and reported without blocking the caller."""

from __future__ import annotations

import time

import pytest

from edgekit.errors import ConfigError
from edgekit.inspect.plc import (GpioOutput, ModbusOutput, ModbusTarget, PlcError, Register, Rejector, ReportKind,
                                 belt_delay)

pytest.importorskip("pymodbus", reason="pymodbus is not installed")


def _wait(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_coil_is_set_after_the_delay_and_cleared_after_the_pulse(modbus_server):
    reports = []
    target = ModbusTarget("127.0.0.1", address=3, port=modbus_server.port, pulse=0.3)
    with Rejector([ModbusOutput(target)], delay=0.15, on_report=reports.append) as rejector:
        crossed = time.perf_counter()
        assert rejector.reject(1, 11, crossed)
        assert time.perf_counter() - crossed < 0.05  # the caller does not wait for the PLC
        assert modbus_server.read("coil", 3) == 0  # not yet: the part is still on its way
        assert _wait(lambda: reports)
        assert modbus_server.read("coil", 3) == 1
        assert _wait(lambda: modbus_server.read("coil", 3) == 0)
    (report,) = reports
    assert report.kind is ReportKind.WRITTEN and report.sequence == 1 and report.track_id == 11
    assert 150 <= report.latency_ms < 1000
    assert [(fc, addr) for fc, addr, _ in modbus_server.sets] == [(5, 3)]
    assert modbus_server.sets[0][2] - crossed >= 0.15


def test_register_and_one_write_per_reject(modbus_server):
    target = ModbusTarget("127.0.0.1", address=2, kind=Register.HOLDING, value=7, port=modbus_server.port, pulse=0)
    with Rejector([ModbusOutput(target)], delay=0.0) as rejector:
        now = time.perf_counter()
        for seq in range(1, 6):
            rejector.reject(seq, seq, now)
        assert _wait(lambda: rejector.counts[ReportKind.WRITTEN] == 5)
    assert modbus_server.read("register", 2) == 7  # pulse 0: left set
    assert [(fc, addr) for fc, addr, _ in modbus_server.sets] == [(6, 2)] * 5
    assert len(rejector.latencies_ms) == 5


def test_unreachable_plc_at_start_is_an_error():
    out = ModbusOutput(ModbusTarget("127.0.0.1", address=1, port=_free_port(), timeout=0.3))
    with pytest.raises(PlcError, match="cannot connect to the PLC at 127.0.0.1"):
        Rejector([out]).start()


def test_address_the_plc_does_not_have_is_an_error_at_start(modbus_server):
    out = ModbusOutput(ModbusTarget("127.0.0.1", address=5000, port=modbus_server.port))
    with pytest.raises(PlcError, match="refused to read the coil"):
        out.check()
    out.close()


def test_plc_down_while_running_is_retried_reported_and_caught_up(start_modbus_server):
    port = _free_port()
    reports = []
    out = ModbusOutput(ModbusTarget("127.0.0.1", address=4, port=port, timeout=0.2, pulse=0))
    rejector = Rejector([out], delay=0.0, retry_interval=0.1, give_up_after=10.0, on_report=reports.append,
                        check=False).start()
    try:
        started = time.perf_counter()
        rejector.reject(1, 5, started)
        assert time.perf_counter() - started < 0.05
        assert _wait(lambda: sum(r.kind is ReportKind.RETRY for r in reports) >= 2)
        assert "cannot connect" in reports[0].error
        server = start_modbus_server(port)  # the PLC comes back
        assert _wait(lambda: any(r.kind is ReportKind.WRITTEN for r in reports))
        assert server.read("coil", 4) == 1
    finally:
        rejector.close()
    written = [r for r in reports if r.kind is ReportKind.WRITTEN]
    assert len(written) == 1 and written[0].attempts >= 3


def test_gives_up_when_the_part_is_long_past_the_ejector():
    reports = []
    out = ModbusOutput(ModbusTarget("127.0.0.1", port=_free_port(), timeout=0.1))
    with Rejector([out], retry_interval=0.05, give_up_after=0.2, on_report=reports.append, check=False) as rejector:
        rejector.reject(9, 1, time.perf_counter())
        assert _wait(lambda: rejector.counts[ReportKind.FAILED] == 1)
    assert reports[-1].kind is ReportKind.FAILED and reports[-1].sequence == 9
    assert rejector.counts[ReportKind.RETRY] >= 1


def test_gpio_pulse_on_mock_pins():
    from gpiozero.pins.mock import MockFactory

    factory = MockFactory()
    out = GpioOutput(17, pulse=0.1, pin_factory=factory)
    pin = factory.pin(17)
    with Rejector([out], delay=0.05) as rejector:
        rejector.reject(1, 1, time.perf_counter())
        assert _wait(lambda: pin.state)
        assert _wait(lambda: not pin.state)
    assert [s.state for s in pin.states] == [False, True, False]


@pytest.mark.parametrize("kwargs, message", [
    ({"address": 70000}, r"modbus coil address: expected a Modbus address 0..65535 \(a coil or register number, "
                         r"from 0\), got 70000"),
    ({"address": -1, "kind": "register"}, "modbus register address: expected a Modbus address 0..65535"),
    ({"port": 0}, "modbus coil port: expected a port number 1-65535, got 0"),
    ({"pulse": -1}, "modbus coil pulse: expected a number >= 0, got -1"),
])
def test_bad_targets(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ModbusTarget("127.0.0.1", **kwargs)


def test_belt_delay():
    assert belt_delay(0.6, 0.25) == pytest.approx(2.4)
    with pytest.raises(ConfigError, match="belt speed > 0"):
        belt_delay(0.6, 0)


def test_encoder_counts_ticks_and_tells_the_count_at_a_moment():
    from edgekit.inspect.encoder import Encoder

    enc = Encoder()
    for t in (1.0, 2.0, 3.0):
        enc.tick(at=t)
    enc.tick(2, at=4.0)
    assert enc.count == 5
    assert [enc.count_at(m) for m in (0.5, 1.0, 2.5, 3.9, 4.0, 9.0)] == [0, 1, 2, 3, 5, 5]


def test_reject_delay_in_encoder_ticks_from_a_gpio_encoder_on_mock_pins():
    """The delay counted in belt travel: the coil goes out once the encoder counted delay_ticks more
    ticks than at the crossing frame's capture, however long the belt takes (here it stops for a while)."""
    from gpiozero.pins.mock import MockFactory

    from edgekit.inspect.encoder import GpioEncoder

    factory = MockFactory()
    encoder = GpioEncoder(27, pin_factory=factory)
    pin, out = factory.pin(27), GpioOutput(17, pulse=0.05, pin_factory=factory)
    reject_pin = factory.pin(17)

    def pulses(n):
        for _ in range(n):
            pin.drive_high()
            pin.drive_low()

    pulses(3)
    captured = time.perf_counter()
    pulses(2)  # ticks between the capture and the verdict count too
    with Rejector([out], encoder=encoder, delay_ticks=10) as rejector:
        rejector.reject(1, 7, captured)
        pulses(7)  # 9 of 10: the belt stops short of the ejector
        time.sleep(0.1)
        assert not reject_pin.state and rejector.counts[ReportKind.WRITTEN] == 0
        pulses(1)
        assert _wait(lambda: rejector.counts[ReportKind.WRITTEN] == 1)
    assert encoder.count == 13
    assert [s.state for s in reject_pin.states] == [False, True, False]


def test_a_reject_still_waiting_for_ticks_at_close_is_reported_failed():
    from gpiozero.pins.mock import MockFactory

    from edgekit.inspect.encoder import Encoder

    reports = []
    out = GpioOutput(18, pulse=0.0, pin_factory=MockFactory())
    rejector = Rejector([out], encoder=Encoder(), delay_ticks=5, give_up_after=0.1, on_report=reports.append).start()
    rejector.reject(4, 2, time.perf_counter())
    rejector.close()
    assert [(r.kind, r.sequence) for r in reports] == [(ReportKind.FAILED, 4)]
    assert "5 ticks short of the ejector" in reports[0].error


@pytest.mark.parametrize("kwargs, message", [
    ({"delay_ticks": 10}, "needs an encoder"),
    ({"delay_ticks": -1, "encoder": object()}, "delay_ticks >= 0"),
    ({"delay_ticks": 10, "delay": 2.0, "encoder": object()}, "no delay in seconds"),
])
def test_bad_tick_delays(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Rejector([], **kwargs)
