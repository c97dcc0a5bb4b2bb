"""When a PyTorch eager run frees each intermediate: the Python lifetimes of tensors.

An eager program frees a storage when the last Python reference to any tensor on it dies, not
after its last use: a tensor bound to a local variable lives until the function returns, a
temporary inside an expression dies at once. Capture runs the model's Python code for real
(only the tensors are fake), so those lifetimes can be observed: this dispatch mode attaches a
finalizer to every tensor an op returns and, when the last tensor on a storage is collected,
records the graph node that was last traced at that moment. The exporter turns that node into
the storage's `released_after` index, which the core's liveness honours.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import get_proxy_mode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class PythonLifetimes(TorchDispatchMode):
    """Records, per storage (keyed by its address), the FX node traced when it was released."""

    def __init__(self) -> None:
        super().__init__()
        self.released_at: dict[int, torch.fx.Node | None] = {}
        self._live: dict[int, int] = {}  # storage key -> live user-visible tensors on it
        self._graph: torch.fx.Graph | None = None
        self.active = True

    def _last_node(self) -> torch.fx.Node | None:
        if self._graph is None or not self.active:
            return None  # released after tracing ended: held to the end of the call
        last = self._graph._root.prev  # fx keeps nodes in a circular list around a sentinel
        return None if last is self._graph._root else last

    def _released(self, key: int) -> None:
        count = self._live.get(key, 0) - 1
        self._live[key] = count
        if count == 0:
            self.released_at[key] = self._last_node()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self._graph is None:
            proxy_mode = get_proxy_mode()
            if proxy_mode is not None:
                self._graph = proxy_mode.tracer.graph
        seen: set[int] = set()
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor) or id(t) in seen:
                continue
            seen.add(id(t))
            key = t.untyped_storage()._cdata
            self._live[key] = self._live.get(key, 0) + 1
            self.released_at.pop(key, None)  # alive again (an in-place result or a new view)
            weakref.finalize(t, self._released, key)
        return out
