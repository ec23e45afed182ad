"""`awaken-s3 dev` refuses an option out of range with argparse's one-line error, through the
installed command, before it starts anything: never a traceback from deep inside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: the console script pip installed beside this interpreter
AWAKEN_S3 = Path(sys.executable).with_name("awaken-s3")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "70000"], "argument --port: must be a whole number from 0 to 65535"),
        (["--port", "-1"], "argument --port: must be a whole number from 0 to 65535"),
        (["--port", "http"], "argument --port: must be a whole number from 0 to 65535"),
        (["--workers", "0"], "argument --workers: must be a whole number of at least 1"),
        (["--workers", "-2"], "argument --workers: must be a whole number of at least 1"),
        (["--lease-seconds", "0"], "argument --lease-seconds: must be a number of seconds above 0"),
        (
            ["--lease-seconds", "-5"],
            "argument --lease-seconds: must be a number of seconds above 0",
        ),
        (
            ["--lease-seconds", "nan"],
            "argument --lease-seconds: must be a number of seconds above 0",
        ),
        (["--sweep-interval", "-1"], "argument --sweep-interval: must be a number of seconds, 0"),
        (["--scripted-delay", "-0.1"], "argument --scripted-delay: must be a number of seconds, 0"),
    ],
)
def test_an_option_out_of_range_is_one_error_line_naming_it_and_the_range(
    args: list[str], said: str
) -> None:
    done = subprocess.run(
        [str(AWAKEN_S3), "dev", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stdout == ""  # no banner: nothing was started
    lines = done.stderr.splitlines()
    # argparse's usage, then one line naming the option, the valid range and the value.
    assert lines[0].startswith("usage: awaken-s3 dev")
    assert [line for line in lines if "error" in line] == [lines[-1]]
    assert lines[-1].startswith(f"awaken-s3 dev: error: {said}")
    assert lines[-1].endswith(f", not {args[1]!r}")
    assert "Traceback" not in done.stderr
