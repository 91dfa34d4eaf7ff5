"""Prometheus' text exposition format (version 0.0.4): a family of samples, a summary, a label
value escaped, a number as Prometheus reads it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

QUANTILES = (0.5, 0.9, 0.99)


def summary(
    out: list[str],
    name: str,
    text: str,
    values: list[float],
    total: tuple[float, int] | None = None,
) -> None:
    """A summary over ``values``: nearest-rank quantiles (none without a value), sum, count
    (``total``'s, when the values are the last few of more)."""
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} summary")
    ranked = sorted(values)
    if ranked:
        for q in QUANTILES:
            value = ranked[max(0, math.ceil(q * len(ranked)) - 1)]
            out.append(f'{name}{{quantile="{q:g}"}} {number(value)}')
    total_sum, count = total or (sum(ranked), len(ranked))
    out.append(f"{name}_sum {number(total_sum)}")
    out.append(f"{name}_count {count}")


def family(  # noqa: PLR0917 - one line per metric family reads best positionally
    out: list[str],
    name: str,
    kind: str,
    text: str,
    samples: Mapping[Any, float],
    labels: tuple[str, ...],
) -> None:
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} {kind}")
    for values, value in sorted(samples.items()):
        pairs = ",".join(f'{k}="{escape(v)}"' for k, v in zip(labels, values, strict=True))
        out.append(f"{name}{{{pairs}}} {number(value)}" if pairs else f"{name} {number(value)}")


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
