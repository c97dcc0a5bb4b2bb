"""Numbers as the reports print them: milliseconds, GiB, SI prefixes."""

from __future__ import annotations


GIB = 1024.0**3


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms" if seconds < 10 else f"{seconds:,.2f} s"


def gib(n: float) -> str:
    return f"{n / GIB:,.2f} GiB"


def si(n: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= factor:
            return f"{n / factor:,.2f} {prefix}{unit}"
    return f"{n:,.0f} {unit}"
