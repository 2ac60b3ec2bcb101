"""Token usage priced with a model's rates (dollars per million tokens)."""

from __future__ import annotations

from tempi.agent.messages import Cost, Usage
from tempi.agent.model_spec import ModelCost

_PER_MILLION = 1_000_000


def priced_usage(
    rates: ModelCost, *, input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0
) -> Usage:
    """Usage with its total token count and its cost in dollars filled in."""
    cost = Cost(
        input=rates.input * input / _PER_MILLION,
        output=rates.output * output / _PER_MILLION,
        cache_read=rates.cache_read * cache_read / _PER_MILLION,
        cache_write=rates.cache_write * cache_write / _PER_MILLION,
    )
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write
    return Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + output + cache_read + cache_write,
        cost=cost,
    )
