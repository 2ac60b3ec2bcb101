"""Token counts as pi and mom print them for people."""

from __future__ import annotations


def short_tokens(count: int) -> str:
    """999, 1.2k, 12k, 1.2M, 12M."""
    if count < 1000:
        return str(count)
    if count < 10_000:
        return f"{count / 1000:.1f}k"
    if count < 1_000_000:
        return f"{round(count / 1000)}k"
    if count < 10_000_000:
        return f"{count / 1_000_000:.1f}M"
    return f"{round(count / 1_000_000)}M"
