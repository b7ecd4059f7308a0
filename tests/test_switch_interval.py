"""`vcbus up` sets the interpreter's switch interval (vcbus/switch_interval.py): 1 ms, or VCBUS_SWITCH_INTERVAL."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from vcbus import switch_interval
from vcbus.errors import UserError

VCBUS = str(pathlib.Path(sys.executable).parent / "vcbus")


@pytest.fixture
def restored():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_default_is_one_millisecond(restored):
    assert switch_interval.configure({}) == 0.001
    assert sys.getswitchinterval() == pytest.approx(0.001)


def test_the_environment_overrides_it(restored):
    assert switch_interval.configure({"VCBUS_SWITCH_INTERVAL": " 0.005 "}) == 0.005
    assert sys.getswitchinterval() == pytest.approx(0.005)


@pytest.mark.parametrize("raw, says", [
    ("fast", "VCBUS_SWITCH_INTERVAL='fast': expected seconds, e.g. 0.001"),
    ("0", "VCBUS_SWITCH_INTERVAL=0: expected 1e-06 to 1 seconds"),
    ("5", "VCBUS_SWITCH_INTERVAL=5: expected 1e-06 to 1 seconds"),
    ("nan", "VCBUS_SWITCH_INTERVAL=nan: expected 1e-06 to 1 seconds"),
])
def test_a_value_it_cannot_use_is_refused_by_name(restored, raw, says):
    before = sys.getswitchinterval()
    with pytest.raises(UserError) as err:
        switch_interval.configure({"VCBUS_SWITCH_INTERVAL": raw})
    assert str(err.value) == says
    assert sys.getswitchinterval() == before


def test_vcbus_up_reads_it_before_it_starts_anything(tmp_path):
    """The command's own wiring: a bad value stops `vcbus up` with the message, before a server starts."""
    proc = subprocess.run([VCBUS, "up", "--once", "--data-dir", str(tmp_path / "data")], capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "VCBUS_SWITCH_INTERVAL": "fast",
                                                       "HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert "VCBUS_SWITCH_INTERVAL='fast': expected seconds" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "data").exists()
