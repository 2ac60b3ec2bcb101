"""An extension whose factory raises: reported, never fatal."""

from typing import Any


def extension(tempi: Any) -> None:
    raise RuntimeError("broken on purpose")
