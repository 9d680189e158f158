"""Resource budgets: how much time (operator executions) and memory a run may take.

A TOSA graph is untrusted input: a WHILE_LOOP nested in a WHILE_LOOP runs each loop's iteration
limit times the other's, and a 2 KB flatbuffer can declare a chain of gigabyte TILEs. Two budgets
stop such graphs with one :class:`~tosa_verify.errors.TosaError` instead of a hang or an
out-of-memory kill:

* **execution budget**: the total number of operators run inside control-flow sub-graphs
  (COND_IF branches, WHILE_LOOP conditions and bodies, at every nesting level) in one run,
  default :data:`DEFAULT_MAX_OPERATIONS` (``TOSA_VERIFY_MAX_OPS``), and the wall-clock time
  control flow may take, default :data:`DEFAULT_MAX_SECONDS` (``TOSA_VERIFY_MAX_SECONDS``): the
  count is the reproducible limit, the clock the guarantee on a loaded machine. :func:`limits`
  changes both.
* **memory budget**: before anything runs, the bytes the graph's tensors need (shapes are
  static) are bounded and a graph over the budget is refused, naming its largest tensors. The
  same budget bounds ``.npy``/``.npz`` files before they are decompressed or allocated. Default:
  half of the physical memory; ``TOSA_VERIFY_MAX_MEMORY`` (``512M``, ``2G``, ...), the CLI's
  ``--max-memory`` or :func:`limits` change it.

>>> from tosa_verify import budget
>>> budget.parse_size("1.5K")
1536
>>> with budget.limits(max_memory="64M"):
...     budget.max_memory()
67108864
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import re
import time
import weakref
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from operator import mul
from pathlib import Path
from typing import IO, Any

import numpy as np

from .dtypes import dtype_info
from .errors import TosaInputError, TosaLimitError, TosaSizeError

#: Operators run inside control-flow sub-graphs per run before the run is stopped. At a few tens
#: to a hundred microseconds per small operator (sub-graph set-up included) this is seconds.
DEFAULT_MAX_OPERATIONS = 50_000
ENV_MAX_MEMORY = "TOSA_VERIFY_MAX_MEMORY"
ENV_MAX_OPERATIONS = "TOSA_VERIFY_MAX_OPS"
#: Seconds of control flow per run before the run is stopped, whatever the operator count.
DEFAULT_MAX_SECONDS = 15.0
ENV_MAX_SECONDS = "TOSA_VERIFY_MAX_SECONDS"

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class _Limits:
    max_memory: int | None = None
    max_operations: int | None = None
    max_seconds: float | None = None


_current: contextvars.ContextVar[_Limits] = contextvars.ContextVar("tosa_verify_limits", default=_Limits())  # noqa: B039 - frozen


def parse_size(text: str | int) -> int:
    """Bytes in a size such as ``"512M"``, ``"2G"``, ``"1.5K"`` or ``"4096"`` (binary units).

    >>> parse_size("2G") == 2 * 1024**3
    True
    >>> parse_size("lots")
    Traceback (most recent call last):
    ...
    ValueError: invalid size 'lots': give bytes or a number with K, M, G or T (e.g. 512M, 2G)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise ValueError(f"invalid size {text!r}: must be positive")
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"invalid size {text!r}: give bytes or a number with K, M, G or T (e.g. 512M, 2G)")
    value = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if value <= 0:
        raise ValueError(f"invalid size {text!r}: must be positive")
    return value


def format_size(size: int) -> str:
    """A short human form of a byte count.

    >>> format_size(3 * 1024**3), format_size(1536)
    ('3.0 GiB', '1.5 KiB')
    """
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


@functools.cache
def physical_memory() -> int:
    """Bytes of physical memory of this machine (8 GiB when the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _environ_get(name: str) -> str | None:
    """``os.environ.get(name)`` without its cost when unset (the Mapping machinery raises and
    catches a KeyError: microseconds, on every run): CPython's ``os.environ`` keeps its values in
    ``_data`` under ``encodekey(name)``; any other mapping is asked the ordinary way.

    >>> _environ_get("PATH") == os.environ.get("PATH")
    True
    """
    environ = os.environ
    data = getattr(environ, "_data", None)
    if type(data) is not dict or not hasattr(environ, "encodekey"):
        return environ.get(name)
    key = _ENV_KEYS.get(name)
    if key is None:
        key = _ENV_KEYS[name] = environ.encodekey(name)
    raw = data.get(key)
    return None if raw is None else environ.decodevalue(raw)


#: ``os.environ.encodekey`` of the names :func:`_environ_get` was asked for (the file-system
#: encoding is fixed for the process)
_ENV_KEYS: dict[str, Any] = {}


def _memory_source() -> tuple[int, str]:
    """The memory budget in bytes and where it comes from (for error messages)."""
    limits = _current.get()
    if limits.max_memory is not None:
        return limits.max_memory, "--max-memory"
    env = _environ_get(ENV_MAX_MEMORY)
    if env:
        try:
            return parse_size(env), ENV_MAX_MEMORY
        except ValueError as exc:
            raise TosaInputError(f"{ENV_MAX_MEMORY}: {exc}") from None
    return physical_memory() // 2, _HALF_OF_PHYSICAL


_HALF_OF_PHYSICAL = f"half of physical memory; set {ENV_MAX_MEMORY} or --max-memory"


def max_memory() -> int:
    """The memory budget in bytes now in force (see the module docstring)."""
    return _memory_source()[0]


def _positive_env(name: str, kind: type, default: float) -> Any:
    """The positive number of ``kind`` in environment variable ``name``, else ``default``."""
    env = os.environ.get(name)
    if not env:
        return default
    try:
        value = kind(env)
    except ValueError:
        raise TosaInputError(f"{name}: not a {'whole ' if kind is int else ''}number: {env!r}") from None
    if not value > 0:
        raise TosaInputError(f"{name}: must be positive, got {env!r}")
    return value


def max_operations() -> int:
    """The execution budget (operators run in control-flow sub-graphs per run) now in force."""
    limit = _current.get().max_operations
    return limit if limit is not None else _positive_env(ENV_MAX_OPERATIONS, int, DEFAULT_MAX_OPERATIONS)


def max_seconds() -> float:
    """The wall-clock budget (seconds of control flow per run) now in force."""
    limit = _current.get().max_seconds
    return limit if limit is not None else _positive_env(ENV_MAX_SECONDS, float, DEFAULT_MAX_SECONDS)


@contextlib.contextmanager
def limits(*, max_memory: str | int | None = None, max_operations: int | None = None,
           max_seconds: float | None = None) -> Iterator[None]:
    """Run the enclosed code with other budgets (``None`` keeps the one in force).

    >>> with limits(max_operations=1000):       # doctest: +SKIP
    ...     tosa_verify.run("loops.tosa", [x])
    """
    current = _current.get()
    if max_operations is not None and (not isinstance(max_operations, int) or max_operations <= 0):
        raise ValueError(f"max_operations must be a positive int, got {max_operations!r}")
    if max_seconds is not None and not max_seconds > 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds!r}")
    token = _current.set(_Limits(
        parse_size(max_memory) if max_memory is not None else current.max_memory,
        max_operations if max_operations is not None else current.max_operations,
        float(max_seconds) if max_seconds is not None else current.max_seconds,
    ))
    try:
        yield
    finally:
        _current.reset(token)


# --------------------------------------------------------------------------- execution budget


def charge(call: Any, block: Any) -> None:
    """Count ``block``'s operators against the run's execution budget before running them.

    Called by the control-flow operators (``call`` is their ``OpCall``) for every sub-graph they
    run; raises :class:`TosaLimitError` naming the operator and sub-graph once the total of the
    run (all nesting levels together) passes the operator budget, or control flow has run
    longer than the time budget.
    """
    runtime = call.runtime
    state = runtime.__dict__.get("_execution_budget")
    if state is None:
        seconds = max_seconds()
        state = runtime.__dict__["_execution_budget"] = [0, max_operations(), time.monotonic() + seconds, seconds]
    state[0] += max(len(block.operators), 1)
    if state[0] > state[1]:
        raise TosaLimitError(
            f"{call._where()}: execution budget exhausted before sub-graph {block.name!r}: control flow "
            f"ran more than {state[1]} operators in this run (set {ENV_MAX_OPERATIONS} or "
            f"tosa_verify.budget.limits(max_operations=...) for longer runs)"
        )
    if time.monotonic() > state[2]:
        raise TosaLimitError(
            f"{call._where()}: execution budget exhausted before sub-graph {block.name!r}: control flow "
            f"ran longer than {state[3]:g} s ({state[0]} operators) in this run (set {ENV_MAX_SECONDS} or "
            f"tosa_verify.budget.limits(max_seconds=...) for longer runs)"
        )


# --------------------------------------------------------------------------- memory budget


def _elements(decl: Any) -> int:
    dims = decl.shape
    if type(dims) is tuple and dims:  # a loaded graph's shape (Python ints): no conversions
        count = math.prod(dims)
        if type(count) is int and min(dims) >= 0:  # (a numpy int among them makes a numpy count)
            return count
    dims = tuple(map(int, dims))
    return math.prod(dims) if not dims or min(dims) >= 0 else math.prod(max(d, 0) for d in dims)


def _itemsize(dtype: str) -> int:
    """Bytes per element of ``dtype``'s working array (8 for an unknown dtype), memoized in
    :data:`_ITEMSIZES`."""
    size = _ITEMSIZES.get(dtype)
    if size is None:
        try:
            size = max(dtype_info(dtype).working.itemsize, 1)
        except Exception:  # noqa: BLE001 - an unknown dtype fails later with its own message
            size = 8
        if type(dtype) is str:  # (a schema-level fact: one entry per dtype name)
            _ITEMSIZES[dtype] = size
    return size


_ITEMSIZES: dict[str, int] = {}


def _tensor_bytes(decl: Any) -> int:
    return _elements(decl) * _itemsize(decl.dtype)


#: The attributes naming a sub-graph (COND_IF, WHILE_LOOP), in the order they are measured.
_SUB_GRAPHS = ("then_graph", "else_graph", "cond_graph", "body_graph")
_SUB_GRAPH_SET = frozenset(_SUB_GRAPHS)


def _block_need(graph: Any, block: Any, active: set[str], memo: dict[str, int],
                sizes: list[tuple[int, str, Any]] | None) -> int:
    """Bytes ``block`` holds while it runs: every tensor it declares (the interpreter keeps a
    block's values until the block ends), plus the worst operator's 64-bit working copy of its
    output, plus what the sub-graphs a control-flow operator runs need on top; each tensor's
    (bytes, block name, declaration) appended to ``sizes`` (None: not wanted).

    ``memo`` holds each block's figure once computed: a graph may name the same sub-graph from
    many operators (or as both branches at every nesting level), which must not cost 2**depth.
    """
    if block.name in memo:
        return memo[block.name]
    # (the need alone, as every run wants it: C-level passes when they apply, on a block with
    # enough tensors to repay their fixed cost)
    if sizes is None and len(block.tensors) > _PLAIN_MIN:
        need = _plain_need(block)
        if need is not None:
            memo[block.name] = need
            return need
    elements, total = _declared(block, sizes)
    active = active | {block.name}
    worst = 0
    for op in block.operators:
        outputs = op.outputs
        # (element counts are >= 0, so an undeclared output's 0 changes no maximum)
        extra = 8 * (elements.get(outputs[0], 0) if len(outputs) == 1 else
                     max((elements[n] for n in outputs if n in elements), default=0))
        attrs = op.attrs
        if type(attrs) is dict and _SUB_GRAPH_SET.isdisjoint(attrs):  # no sub-graph: the common case
            if extra > worst:
                worst = extra
            continue
        subs = []
        for attr in _SUB_GRAPHS:
            name = attrs.get(attr) if isinstance(attrs, Mapping) else None
            if not name or name in active:
                continue  # a cycle fails at run time with its own nesting error
            try:
                sub = graph.block(name)
            except Exception:  # noqa: BLE001 - a missing sub-graph fails at run time, clearly
                continue
            subs.append(_block_need(graph, sub, active, memo, sizes))
        if op.op == "WHILE_LOOP":
            extra += sum(subs)  # the body's result list is alive while the condition runs
        elif subs:
            extra += max(subs)
        worst = max(worst, extra)
    memo[block.name] = total + worst
    return memo[block.name]


def _plain_need(block: Any) -> int | None:
    """:func:`_block_need` of a block without sub-graphs whose shapes are tuples of Python ints
    >= 0 and whose dtypes are known (any loaded graph's), in C-level passes (``map`` over
    builtins, no Python call per tensor or operator); None for any other block.

    >>> _plain_need(load("add.tosa").main)   # doctest: +SKIP
    96
    """
    decls = {**block.shapes, **block.tensors} if block.shapes else block.tensors
    values = decls.values()
    shapes = [d.shape for d in values]
    try:
        if not set(map(type, shapes)) <= _TUPLE or min(chain.from_iterable(shapes), default=0) < 0:
            return None
    except TypeError:  # (a dimension that is no number: the general pass decides)
        return None
    counts = list(map(math.prod, shapes))
    if not set(map(type, counts)) <= _INT:  # (numpy ints among the dimensions)
        return None
    dtypes = [d.dtype for d in values]
    itemsizes = list(map(_ITEMSIZES.get, dtypes))
    if None in itemsizes:  # (a dtype's first use in this process)
        itemsizes = list(map(_itemsize, dtypes))
    ops = block.operators
    attrs = [o.attrs for o in ops]
    # (every key of every operator's attributes in one pass: none names a sub-graph)
    if not set(map(type, attrs)) <= _DICT or not _SUB_GRAPH_SET.isdisjoint(chain.from_iterable(attrs)):
        return None
    elements = dict(zip(decls, counts))  # noqa: B905 - one count per declaration
    names = chain.from_iterable([o.outputs for o in ops])
    # the worst operator's 64-bit working copy of an output (undeclared outputs count 0)
    worst = max(map(elements.get, names, repeat(0)), default=0)
    return sum(map(mul, counts, itemsizes)) + 8 * worst


_TUPLE, _INT, _DICT = frozenset((tuple,)), frozenset((int,)), frozenset((dict,))
#: Fewest tensors of a block whose need :func:`_plain_need` computes (below, the loop is faster)
_PLAIN_MIN = 40


def _declared(block: Any, sizes: list[tuple[int, str, Any]] | None) -> tuple[dict[str, int], int]:
    """Elements of each tensor ``block`` declares (a tensor wins over a shape of its name), and
    their bytes in all; appends each one's (bytes, block name, declaration) to ``sizes``.

    One pass with :func:`_elements`'s and :func:`_itemsize`'s common cases inline: it runs for
    every tensor of every graph before its first run.
    """
    decls = {**block.shapes, **block.tensors} if block.shapes else block.tensors
    elements: dict[str, int] = {}
    total = 0
    block_name, prod, itemsizes = block.name, math.prod, _ITEMSIZES
    for name, decl in decls.items():
        dims = decl.shape
        count = prod(dims) if type(dims) is tuple and dims and min(dims) >= 0 else None
        if type(count) is not int:  # (not a loaded graph's shape of Python ints >= 0)
            count = _elements(decl)
        elements[name] = count
        itemsize = itemsizes.get(decl.dtype)
        size = count * (itemsize if itemsize is not None else _itemsize(decl.dtype))
        total += size
        if sizes is not None:
            sizes.append((size, block_name, decl))
    return elements, total


def graph_memory(graph: Any) -> tuple[int, list[tuple[int, str, Any]]]:
    """Upper bound of the bytes a run of ``graph`` holds, and every tensor's size, largest first.

    >>> need, largest = graph_memory(tosa_verify.load("model.tosa"))   # doctest: +SKIP
    """
    need, sizes = _graph_need(graph)
    sizes.sort(key=_largest_first)
    return need, sizes


def _graph_need(graph: Any) -> tuple[int, list[tuple[int, str, Any]]]:
    """:func:`graph_memory` with the tensors' sizes in declaration order (unsorted)."""
    sizes: list[tuple[int, str, Any]] = []
    return _block_need(graph, graph.main, set(), {}, sizes), sizes


class _LazySizes:
    """The tensors' sizes of :func:`_graph_need`, worked out when first iterated: a run needs
    them only to name the largest tensors of a graph over the budget.

    Kept on the graph (:func:`cached_graph_memory`), so it refers to the graph weakly: a strong
    reference would make a cycle, and a graph evicted from the interpreter's cache would wait for
    the cyclic garbage collector instead of being freed at once."""

    __slots__ = ("graph", "sizes")

    def __init__(self, graph: Any) -> None:
        self.graph, self.sizes = weakref.ref(graph), None

    def __iter__(self) -> Iterator[tuple[int, str, Any]]:
        if self.sizes is None:
            graph = self.graph()
            # (only a run of the graph iterates this, and it holds the graph)
            self.sizes = _graph_need(graph)[1] if graph is not None else []
        return iter(self.sizes)


def _need_only(graph: Any) -> tuple[int, _LazySizes]:
    """:func:`_graph_need` with the sizes left to a :class:`_LazySizes`."""
    return _block_need(graph, graph.main, set(), {}, None), _LazySizes(graph)


def _largest_first(size: tuple[int, str, Any]) -> int:
    return -size[0]


def cached_graph_memory(graph: Any) -> tuple[int, list[tuple[int, str, Any]]]:
    """:func:`graph_memory`, computed once per graph and again only after the graph was edited
    (see :func:`tosa_verify.plan.verify_graph`, which drops it with the graph's plans).

    Shapes are static, so the need of a graph never changes; the budget it is compared with
    can (environment, :func:`limits`), which is why only the need is kept.

    >>> cached_graph_memory(g) is cached_graph_memory(g)   # doctest: +SKIP
    True
    """
    memo = graph.__dict__.get("_memory")
    if memo is None:  # (the sizes unsorted and lazy: check_need sorts them only to name the largest)
        memo = graph.__dict__["_memory"] = _need_only(graph)
    return memo


def check_need(need: int, sizes: list[tuple[int, str, Any]]) -> int:
    """Refuse a graph needing ``need`` bytes (tensor ``sizes`` as from :func:`graph_memory`, in
    any order) when that is over the memory budget now in force; return ``need`` otherwise."""
    budget, source = _memory_source()
    if need > budget:
        largest = sorted(sizes, key=_largest_first)[:3]  # (stable: a sorted list stays as it is)
        shown = ", ".join(f"{d.name!r} {d.dtype}{list(d.shape)} {format_size(s)}" for s, _, d in largest)
        raise TosaSizeError(
            f"graph needs about {format_size(need)} of memory for its tensors, over the memory budget of "
            f"{format_size(budget)} ({source}); largest tensors: {shown}"
        )
    return need


def check_graph_memory(graph: Any) -> int:
    """Refuse ``graph`` with :class:`TosaSizeError` when its tensors need more than the memory
    budget now in force; returns the bytes needed otherwise. Nothing is allocated.

    >>> check_graph_memory(tosa_verify.load("six_tiles.tosa"))   # doctest: +SKIP
    Traceback (most recent call last):
    tosa_verify.errors.TosaSizeError: graph needs about 6.0 GiB ... largest tensors: 't1' INT8[...] 1.0 GiB, ...
    """
    return check_need(*graph_memory(graph))


# --------------------------------------------------------------------------- .npy / .npz files


def _npy_header(stream: IO[bytes], what: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, data bytes) from an open ``.npy`` stream, reading only its header."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream, max_header_size=10000)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream, max_header_size=10000)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, EOFError, SyntaxError, TypeError, OSError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise TosaInputError(f"{what}: not a valid .npy array ({detail})") from None
    if dtype.hasobject:
        raise TosaInputError(f"{what}: holds Python objects ({dtype}); only plain arrays are read")
    count = 1
    for d in shape:
        count *= int(d)
    return tuple(int(d) for d in shape), dtype, count * dtype.itemsize


def _check_budget(nbytes: int, what: str) -> None:
    budget, source = _memory_source()
    if nbytes > budget:
        raise TosaSizeError(f"{what}: needs {format_size(nbytes)}, over the memory budget of "
                            f"{format_size(budget)} ({source})")


def load_input_npy(path: str | os.PathLike, what: str = "input") -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """:func:`load_npy`, paired with ``<stem>_scale.npy`` when that file exists: the (values,
    scales) of a block-scaled input, the files the reference model's CLI reads.

    >>> load_input_npy("b.npy")   # doctest: +SKIP
    """
    scales = Path(path).with_name(f"{Path(path).stem}_scale.npy")
    if scales.is_file():
        return load_npy(path, what), load_npy(scales, f"{what} scales")
    return load_npy(path, what)


def load_npy(path: str | os.PathLike, what: str = "input") -> np.ndarray:
    """Read an ``.npy`` file after checking its header against the file size and the memory
    budget, so a header claiming a huge shape is refused before anything is allocated.

    >>> load_npy("x.npy", "input")   # doctest: +SKIP
    """
    label = f"{what} {str(path)!r}"
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as stream:
            if size == 0:
                raise TosaInputError(f"{label}: empty file, not a .npy array")
            _, _, nbytes = _npy_header(stream, label)
            if stream.tell() + nbytes > size:
                raise TosaInputError(f"{label}: truncated ({size} bytes, its header declares "
                                     f"{stream.tell() + nbytes})")
            _check_budget(nbytes, label)
            stream.seek(0)
            return np.load(stream, allow_pickle=False)
    except OSError as exc:
        raise TosaInputError(f"cannot read {label}: {exc.strerror or exc}") from None
    except (ValueError, EOFError) as exc:
        raise TosaInputError(f"cannot read {label}: {' '.join(str(exc).split())}") from None


def npz_members(path: str | os.PathLike, what: str,
                expected: Mapping[str, tuple[str, tuple[int, ...]] | None] | None = None) -> dict[str, int]:
    """Check an ``.npz`` archive without decompressing it: each member's declared sizes (zip
    directory and ``.npy`` header) against each other, their total against the memory budget,
    and, with ``expected`` (member name -> (numpy dtype.str, shape) or None), the names, dtypes and shapes.
    Returns the data bytes per member name.
    """
    label = f"{what} {str(path)!r}"
    sizes: dict[str, int] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            declared = sum(i.file_size for i in infos)
            _check_budget(declared, label)
            for info in infos:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                member = f"{label} member {name!r}"
                if not info.filename.endswith(".npy"):
                    raise TosaInputError(f"{member}: not an .npy array")
                if expected is not None and name not in expected:
                    raise TosaInputError(f"{member}: not listed in the manifest")
                with archive.open(info) as stream:
                    shape, dtype, nbytes = _npy_header(stream, member)
                    if stream.tell() + nbytes != info.file_size:
                        raise TosaInputError(f"{member}: its header declares {nbytes} data bytes, "
                                             f"the archive holds {info.file_size - stream.tell()}")
                want = expected.get(name) if expected is not None else None
                if want is not None and (dtype.str != want[0] or shape != tuple(want[1])):
                    raise TosaInputError(f"{member}: {dtype.str}{list(shape)}, the manifest says "
                                         f"{want[0]}{list(want[1])}")
                sizes[name] = nbytes
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise TosaInputError(f"{label}: not a readable .npz archive ({' '.join(str(exc).split())})") from None
    except OSError as exc:
        raise TosaInputError(f"cannot read {label}: {exc.strerror or exc}") from None
    if expected is not None:
        missing = sorted(set(expected) - set(sizes))
        if missing:
            raise TosaInputError(f"{label}: member(s) {missing} listed in the manifest are missing")
    return sizes


def load_npz(path: str | os.PathLike, what: str,
             expected: Mapping[str, tuple[str, tuple[int, ...]] | None] | None = None) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` after :func:`npz_members` accepted it.

    >>> state = load_npz("state.npz", "variable state")   # doctest: +SKIP
    """
    npz_members(path, what, expected)
    label = f"{what} {str(path)!r}"
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TosaInputError(f"cannot read {label}: {' '.join(str(exc).split())}") from None

