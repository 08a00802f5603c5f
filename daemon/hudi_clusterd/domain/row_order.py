"""Layout-optimisation vocabulary: how clustering orders rows (Hudi's ``hoodie.layout.optimize.*`` values)."""

from __future__ import annotations

from enum import Enum


class LayoutStrategy(str, Enum):
    """``hoodie.layout.optimize.strategy``: the order rows are written in when sort columns are set."""

    LINEAR = "linear"
    ZORDER = "z-order"
    HILBERT = "hilbert"

    @classmethod
    def parse(cls, value: str) -> LayoutStrategy:
        """Accept Hudi's spellings case-insensitively: LINEAR, ZORDER, Z-ORDER, HILBERT."""
        v = value.strip().lower()
        if v in ("zorder", "z-order", "z_order"):
            return cls.ZORDER
        for member in cls:
            if member.value == v:
                return member
        raise ValueError(f"unknown layout strategy {value!r} (expected linear, z-order or hilbert)")


class CurveBuildMethod(str, Enum):
    """``hoodie.layout.optimize.curve.build.method``: how column values become curve coordinates."""

    DIRECT = "direct"
    SAMPLE = "sample"

    @classmethod
    def parse(cls, value: str) -> CurveBuildMethod:
        v = value.strip().lower()
        for member in cls:
            if member.value == v:
                return member
        raise ValueError(f"unknown curve build method {value!r} (expected direct or sample)")
