"""Truncation helpers and bash's windowed output accumulator, checked on random text."""

from __future__ import annotations

import random

from tempi.activities.tools.bash_output import OutputAccumulator, clean_terminal_text
from tempi.agent.truncation import format_size, truncate_head, truncate_line, truncate_tail, utf8_len

_ALPHABET = "ab é€\n\n"


def _random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(size))


def test_format_size():
    assert [format_size(n) for n in (0, 1023, 1024, 70001, 3 * 1024 * 1024)] == [
        "0B", "1023B", "1.0KB", "68.4KB", "3.0MB"
    ]  # fmt: skip


def test_truncate_line():
    assert truncate_line("short") == ("short", False)
    cut, was_cut = truncate_line("x" * 600)
    assert was_cut and cut.startswith("x" * 500) and not cut.startswith("x" * 501)


def test_head_keeps_the_longest_whole_line_prefix_within_limits():
    rng = random.Random(7)
    for _ in range(400):
        text = _random_text(rng, rng.randint(0, 120))
        max_lines, max_bytes = rng.randint(1, 12), rng.randint(1, 60)
        result = truncate_head(text, max_lines, max_bytes)
        lines = text.split("\n")
        assert result.total_lines == len(lines) and result.total_bytes == utf8_len(text)
        assert result.truncated == (len(lines) > max_lines or utf8_len(text) > max_bytes)
        kept = result.content.split("\n") if result.output_lines else []
        assert kept == lines[: result.output_lines]
        assert result.output_lines <= max_lines and result.output_bytes <= max_bytes
        if result.truncated and result.output_lines < min(max_lines, len(lines)):
            # One more line would have broken the byte limit.
            assert utf8_len("\n".join(lines[: result.output_lines + 1])) > max_bytes
        assert result.first_line_exceeds_limit == (result.truncated and utf8_len(lines[0]) > max_bytes)


def test_tail_keeps_the_longest_whole_line_suffix_or_the_end_of_the_last_line():
    rng = random.Random(11)
    for _ in range(400):
        text = _random_text(rng, rng.randint(0, 120))
        max_lines, max_bytes = rng.randint(1, 12), rng.randint(1, 60)
        result = truncate_tail(text, max_lines, max_bytes)
        lines = text.split("\n")
        assert result.truncated == (len(lines) > max_lines or utf8_len(text) > max_bytes)
        assert result.output_bytes <= max_bytes
        if result.last_line_partial:
            assert result.output_lines == 1 and lines[-1].endswith(result.content)
            assert utf8_len(lines[-1]) > max_bytes
        else:
            assert result.content.split("\n") == lines[len(lines) - result.output_lines :]
            assert result.output_lines <= max_lines


def _feed_in_random_chunks(rng: random.Random, accumulator: OutputAccumulator, data: bytes) -> None:
    position = 0
    while position < len(data):
        step = rng.randint(1, 150)
        accumulator.append(data[position : position + step])
        position += step


def test_accumulator_matches_truncating_the_whole_output_however_it_is_chunked(tmp_path):
    rng = random.Random(3)
    for round_number in range(60):
        text = "".join(rng.choice("abc €\n") for _ in range(rng.randint(0, 3000)))
        data = text.encode("utf-8")
        spill = tmp_path / f"spill-{round_number}.log"
        accumulator = OutputAccumulator(str(spill), max_lines=40, max_bytes=200)
        _feed_in_random_chunks(rng, accumulator, data)
        result = accumulator.finish()
        assert result == truncate_tail(text, 40, 200)
        assert spill.read_bytes() == data if result.truncated else not spill.exists()


def test_accumulator_with_terminal_noise_shows_a_clean_tail_of_whole_lines(tmp_path):
    rng = random.Random(5)
    for round_number in range(60):
        text = "".join(
            rng.choice(["a", "b", "€", "\n", "\x1b[31m", "\r", "\r\n"]) for _ in range(rng.randint(0, 3000))
        )
        data = text.encode("utf-8")
        spill = tmp_path / f"spill-{round_number}.log"
        accumulator = OutputAccumulator(str(spill), max_lines=40, max_bytes=200)
        _feed_in_random_chunks(rng, accumulator, data)
        result = accumulator.finish()
        cleaned = clean_terminal_text(text)
        assert "\x1b" not in result.content and "\r" not in result.content
        assert cleaned.endswith(result.content) and result.output_bytes <= 200
        if result.truncated:
            assert result.total_bytes == len(data) and result.total_lines == text.count("\n") + 1
            assert spill.read_bytes() == data
        else:
            assert result.content == cleaned and not spill.exists()


def test_spill_cap_defaults_to_64_mb_and_follows_the_worker_setting(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tempi.activities.tools.bash_output import spill_max_bytes

    monkeypatch.delenv("TEMPI_SPILL_MAX_MB", raising=False)
    assert spill_max_bytes() == 64 * 1024 * 1024
    monkeypatch.setenv("TEMPI_SPILL_MAX_MB", "0.5")
    assert spill_max_bytes() == 512 * 1024
    for bad in ("lots", "-1", "nan"):
        monkeypatch.setenv("TEMPI_SPILL_MAX_MB", bad)
        assert spill_max_bytes() == 64 * 1024 * 1024
