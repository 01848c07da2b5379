"""``hpc.put``: references to objects stored once and shared by many tasks."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from eugo_lab.units import fmt_bytes

_ids = itertools.count(1)


class ObjectRef:
    """A handle to an object stored by ``hpc.put``; tasks receive the object itself.

    ``location`` is backend-specific (a shared-memory path, a Dask future, a Ray ref);
    the backend's ``token``/``load`` pair turns it back into the value on a worker.
    The stored copy is freed when the last reference on the driver is dropped.
    """

    __slots__ = ("ref_id", "location", "nbytes", "type_name", "_release", "__weakref__")

    def __init__(self, location: Any, nbytes: int, type_name: str, release: Callable[[], None] | None = None):
        self.ref_id = next(_ids)
        self.location = location
        self.nbytes = nbytes
        self.type_name = type_name
        self._release = release

    def __repr__(self) -> str:
        return f"<hpc.ObjectRef {self.type_name}, {fmt_bytes(self.nbytes)}>"

    def __del__(self) -> None:
        release = self._release
        if release is not None:
            self._release = None
            try:
                release()
            except Exception:  # noqa: BLE001 - interpreter teardown; nothing to report to
                pass

    def __reduce__(self) -> Any:
        raise TypeError(
            "an hpc.ObjectRef can only be passed as an argument of a .remote() call in the "
            "runtime that created it; call hpc.get(ref) to obtain the value"
        )


def describe_type(obj: Any) -> str:
    """Short type name for reprs: ``ndarray``, ``DataFrame``, ``dict``."""
    return type(obj).__name__
