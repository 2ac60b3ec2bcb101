"""Every flag pi 0.73.1 accepts, tempi accepts (issue 36, item 4): the test walks pi's own
`--help` (recorded by scripts/record_pi_help.py into tests/fixtures/pi-0.73.1/help.txt), and
gives each flag to tempi's parser with a value where pi takes one. The flags tempi does
nothing with say so, in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tempi.cli.args import parse_args
from tests.conftest import run_tempi, tempi_env

HELP = Path(__file__).parent / "fixtures" / "pi-0.73.1" / "help.txt"
# A value pi's placeholder accepts that tempi's parser accepts too (others take any text).
VALUES = {"<mode>": "json", "<level>": "high", "<tools>": "read,bash"}


def pi_options() -> list[tuple[str, str | None]]:
    """(flag, placeholder) for every flag and alias in the help's Options section;
    the placeholder is `<x>` for a value pi requires, `[x]` for one it may take."""
    section = HELP.read_text().split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    options: list[tuple[str, str | None]] = []
    for line in section.splitlines():
        spec = re.match(r"  (-\S.*?)(?:\s{2,}|$)", line)
        if spec is None:
            continue  # a description's second line
        words = spec.group(1).split()
        placeholder = words.pop() if words[-1][0] in "<[" else None
        options += [(word.rstrip(","), placeholder) for word in words]
    return options


def test_the_recording_lists_pis_flags() -> None:
    flags = dict(pi_options())
    assert len(flags) == 46  # pi 0.73.1's 33 options and their 13 short names
    assert flags["--theme"] == "<path>" and flags["--no-themes"] is None
    assert flags["-t"] == "<tools>" and flags["--list-models"] == "[search]"


@pytest.mark.parametrize(("flag", "placeholder"), pi_options(), ids=lambda v: str(v))
def test_tempi_accepts_every_pi_flag(
    flag: str, placeholder: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [flag] if placeholder is None else [flag, VALUES.get(placeholder, "some-value")]
    if flag in ("--help", "-h", "--version", "-v"):
        with pytest.raises(SystemExit) as exited:
            parse_args(argv)
        assert exited.value.code == 0
        assert capsys.readouterr().out
        return
    args = parse_args([*argv, "a prompt"])
    # The value went to the flag, not to the prompts.
    assert args.messages == ["a prompt"]


def test_flags_tempi_does_nothing_with_say_so_in_one_line(tmp_path: Path) -> None:
    env = tempi_env(tmp_path / "home", None)
    done = run_tempi(
        [
            "--theme",
            "dark.json",
            "--theme",
            "light.json",
            "--no-themes",
            "--list-models",
            "claude-sonnet-4-5",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "claude-sonnet-4-5" in done.stdout
    noted = [line for line in done.stderr.splitlines() if "--theme" in line]
    assert noted == [
        "tempi: --theme and --no-themes ignored: tempi's terminal UI has one built-in look, no themes"
    ]
