"""Edit tracking for loaded graphs: a tick that changes on every edit of a graph's structure.

A caller may edit a :class:`~tosa_verify.graph.Graph` it holds between runs; the plans cached
on it must then be rebuilt (see :func:`tosa_verify.plan.current_blocks`). Comparing a snapshot
of the whole graph on every run costs as much as running a one-operator graph, so the graph,
its regions and blocks (:class:`Watched`), the containers a loaded graph holds and the op
registry (:class:`WatchedList`, :class:`WatchedDict`) change :data:`TICK` on every attribute
assignment and every in-place change. While the tick stays where it was when a graph was last
found unchanged, a run compares only its operators and declarations (too many to build with a
hook at load time: see :func:`tosa_verify.plan._checked_at`); any edit anywhere (of any graph)
makes the next run of every graph compare in full once.

The loader builds the watched objects with :func:`constructor` (no tick: loading a graph edits
none), and a graph holding a container of another type (a plain list a caller assigned) is
compared in full on every run, as that container can change unseen (see :func:`watched`).

>>> from tosa_verify import _edits
>>> before = _edits.TICK
>>> items = WatchedList([1, 2])
>>> items.append(3)
>>> _edits.TICK != before
True
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

#: Changes (to a value never used before) on every edit of a watched object.
TICK = 0
_TICKS = itertools.count(1)


def _bump() -> None:
    global TICK
    TICK = next(_TICKS)  # (a fresh value: a stale write can never bring back a recorded one)


class Watched:
    """Mixin of the graph classes: assigning or deleting an attribute changes :data:`TICK`.

    Caches kept on an object (``obj.__dict__[...]``) bypass it on purpose: they are no edit.
    """

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _bump()  # (after the change: a check that read the old tick compares in full next time)

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)
        _bump()


def _bumping(method: Callable) -> Callable:
    def edit(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        _bump()
        return result

    edit.__name__, edit.__doc__ = method.__name__, method.__doc__
    return edit


class WatchedList(list):
    """A list whose every in-place change changes :data:`TICK` (reading costs as a list's).

    >>> WatchedList([1]) == [1]
    True
    """

    __slots__ = ()
    for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert", "pop",
                  "remove", "clear", "sort", "reverse"):  # (every mutating method of list)
        locals()[_name] = _bumping(getattr(list, _name))
    del _name


class WatchedDict(dict):
    """A dict whose every in-place change changes :data:`TICK` (reading costs as a dict's).

    >>> WatchedDict(a=1) == {"a": 1}
    True
    """

    __slots__ = ()
    for _name in ("__setitem__", "__delitem__", "__ior__", "pop", "popitem", "clear", "update", "setdefault"):
        locals()[_name] = _bumping(getattr(dict, _name))  # (every mutating method of dict)
    del _name


def constructor(cls: type) -> Callable[..., Any]:
    """A constructor of dataclass ``cls`` with the same parameters that sets the fields without
    changing :data:`TICK` (the loader's: a new object is no edit).

    >>> @dataclasses.dataclass
    ... class Point(Watched):
    ...     x: int
    ...     y: int = 0
    >>> from tosa_verify import _edits
    >>> before = _edits.TICK
    >>> constructor(Point)(1), _edits.TICK == before
    (Point(x=1, y=0), True)
    """
    fields = dataclasses.fields(cls)
    namespace: dict[str, Any] = {"new": object.__new__, "set_dict": object.__setattr__, "cls": cls,
                                 "missing": dataclasses.MISSING}
    params, body = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            namespace[f"default_{f.name}"] = f.default
            params.append(f"{f.name}=default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=missing")
            body.append(f"    if {f.name} is missing:\n        {f.name} = factory_{f.name}()\n")
        else:
            params.append(f.name)
    values = ", ".join(f"{f.name!r}: {f.name}" for f in fields)
    source = (f"def make({', '.join(params)}):\n{''.join(body)}    obj = new(cls)\n"
              f"    set_dict(obj, '__dict__', {{{values}}})\n    return obj\n")
    exec(source, namespace)  # noqa: S102 - generated from the dataclass's own field names, as dataclasses does
    make = namespace["make"]
    make.__qualname__ = make.__name__ = f"new_{cls.__name__}"
    return make


def watched(graph: Any) -> bool:
    """Whether every container of ``graph`` its plans depend on is watched (its region and
    block lists, each block's operators, declarations and interface) and every declared shape
    is a tuple: only then can :data:`TICK` stand in for a comparison of the graph.

    >>> watched(tosa_verify.load("model.tosa"))   # doctest: +SKIP
    True
    """
    regions = graph.regions
    if type(regions) is not WatchedList:
        return False
    for region in regions:
        if type(region.blocks) is not WatchedList:
            return False
        for block in region.blocks:
            if not (type(block.operators) is type(block.inputs) is type(block.outputs) is WatchedList
                    and type(block.tensors) is type(block.shapes) is WatchedDict):
                return False
            for decls in (block.tensors, block.shapes):
                if any(type(d.shape) is not tuple for d in decls.values()):
                    return False
    return True
