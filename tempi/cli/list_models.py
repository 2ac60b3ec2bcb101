"""`tempi --list-models [SEARCH]`: the models tempi knows, and whether a key is set."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from tempi.agent.model_registry import ModelRegistry
from tempi.config.api_keys import has_configured_key


def _tokens(n: int) -> str:
    """pi's format: 200000 -> "200K", 1000000 -> "1M", 32768 -> "32.8K"."""
    for size, unit in ((1_000_000, "M"), (1000, "K")):
        if n >= size:
            value = Decimal(n) / size
            text = str(value) if value % 1 == 0 else str(value.quantize(Decimal("0.1"), ROUND_HALF_UP))
            return text + unit
    return str(n)


def list_models(registry: ModelRegistry, search: str) -> str:
    needle = search.strip().lower()
    models = [
        m for m in registry.models
        if not needle or needle in f"{m.provider}/{m.id}".lower() or needle in m.name.lower()
    ]  # fmt: skip
    if not models:
        return f'No model matches "{search}". Run tempi --list-models to see them all.'
    head = ("PROVIDER", "MODEL", "CONTEXT", "MAX OUT", "THINKING", "IMAGES", "KEY")
    rows = [
        (
            m.provider,
            m.id,
            _tokens(m.context_window),
            _tokens(m.max_tokens),
            "yes" if m.reasoning else "no",
            "yes" if m.supports_images else "no",
            "set" if has_configured_key(m.provider, registry) else "-",
        )
        for m in sorted(models, key=lambda m: (m.provider, m.id))
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]
    return "\n".join(lines)
