"""The in-memory TOSA graph: regions, blocks, tensors and operators as plain Python values.

Reading goes through the flatbuffers module ``tosa`` generated from the TOSA schema and shipped
in tosa-tools; no flatbuffer parsing is written by hand here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .dtypes import DTYPE_BY_CODE, decode_constant
from .errors import (
    TosaError,
    TosaFormatError,
    TosaSizeError,
    TosaUnsupportedError,
    TosaValidationError,
)

#: Largest tensor (in elements) we agree to hold; checked before any allocation.
MAX_TENSOR_ELEMENTS = 1 << 31

_ENUM_FIELDS = {
    "rounding_mode": {0: "UNKNOWN", 1: "SINGLE_ROUND", 2: "INEXACT_ROUND", 3: "DOUBLE_ROUND"},
    "mode": {0: "UNKNOWN", 1: "NEAREST", 2: "BILINEAR"},
    "nan_mode": {0: "UNKNOWN", 1: "PROPAGATE", 2: "IGNORE"},
}
_SKIP_METHODS = {"Init", "GetRootAs"}


@dataclass
class Tensor:
    """A declared tensor of a basic block.

    ``data`` holds the constant value (working numpy dtype) when the tensor has serialized data.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None
    variable: bool = False
    variable_name: str = ""
    unranked: bool = False

    @property
    def size(self) -> int:
        """Number of elements (1 for rank 0)."""
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Operator:
    """One operator: TOSA op name, attributes as plain values, input and output tensor names."""

    op: str
    attrs: dict[str, object]
    inputs: list[str]
    outputs: list[str]
    location: str = ""


@dataclass
class Block:
    """A basic block: its operators in order, tensors by name, and its interface."""

    name: str
    operators: list[Operator]
    tensors: dict[str, Tensor]
    inputs: list[str]
    outputs: list[str]
    shapes: dict[str, Tensor] = field(default_factory=dict)


@dataclass
class Region:
    """A region: a named list of blocks (the first is the region's entry block)."""

    name: str
    blocks: list[Block]


@dataclass
class Graph:
    """A whole TOSA graph. ``main`` is the first block of the first region.

    >>> g = load("model.tosa")            # doctest: +SKIP
    >>> [op.op for op in g.main.operators][:3]  # doctest: +SKIP
    ['CONST_SHAPE', 'RESHAPE', 'CONV2D']
    """

    version: tuple[int, int, int, bool]
    regions: list[Region]
    raw: bytes = b""

    @property
    def main(self) -> Block:
        """The entry block (first block of the first region)."""
        return self.regions[0].blocks[0]

    def block(self, name: str) -> Block:
        """Find a block by name in any region (control-flow ops refer to blocks by name)."""
        for region in self.regions:
            for block in region.blocks:
                if block.name == name:
                    return block
        for region in self.regions:
            if region.name == name and region.blocks:
                return region.blocks[0]
        raise TosaFormatError(f"no basic block or region named {name!r} in the graph")

    @property
    def version_string(self) -> str:
        major, minor, patch, draft = self.version
        return f"{major}.{minor}.{patch}" + ("d" if draft else "")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _read_attributes(fb_op, op_name: str) -> dict[str, object]:
    import tosa.Attribute as attribute_enum

    kind = fb_op.AttributeType()
    if kind == 0:
        return {}
    names = {v: k for k, v in vars(attribute_enum.Attribute).items() if not k.startswith("_")}
    class_name = names.get(kind)
    if class_name is None:
        raise TosaUnsupportedError(f"{op_name}: unknown attribute type {kind}")
    module = __import__(f"tosa.{class_name}", fromlist=[class_name])
    cls = getattr(module, class_name)
    table = fb_op.Attribute()
    attr = cls()
    attr.Init(table.Bytes, table.Pos)
    result: dict[str, object] = {}
    for meth in dir(cls):
        if not meth[:1].isupper() or meth in _SKIP_METHODS or meth.startswith("GetRootAs"):
            continue
        if meth.endswith(("Length", "IsNone", "AsNumpy", "BufferHasIdentifier")):
            continue
        key = _snake(meth)
        if hasattr(cls, meth + "Length"):
            if getattr(attr, meth + "IsNone")():
                result[key] = []
                continue
            as_numpy = getattr(attr, meth + "AsNumpy")()
            if meth in ("MinVal", "MaxVal"):
                result[key] = bytes(np.asarray(as_numpy, dtype=np.uint8))
            else:
                result[key] = [int(v) for v in as_numpy] if not isinstance(as_numpy, int) else []
            continue
        value = getattr(attr, meth)()
        if isinstance(value, bytes):
            value = value.decode("utf8")
        if key in _ENUM_FIELDS:
            value = _ENUM_FIELDS[key].get(value, value)
        elif key == "acc_type":
            value = DTYPE_BY_CODE[value].name if value in DTYPE_BY_CODE else value
        result[key] = value
    return result


def _read_tensor(fb_tensor) -> Tensor:
    name = fb_tensor.Name().decode("utf8")
    code = fb_tensor.Type()
    info = DTYPE_BY_CODE.get(code)
    if info is None:
        raise TosaUnsupportedError(f"tensor {name!r}: unsupported dtype code {code}")
    shape = tuple(int(d) for d in fb_tensor.ShapeAsNumpy()) if not fb_tensor.ShapeIsNone() else ()
    if any(d < 0 for d in shape):
        # TOSA 1.0 has no dynamic dimensions, so a negative one makes the graph invalid (the
        # generator's list-shape ERROR_IF cases produce such tensors).
        raise TosaValidationError(
            f"tensor {name!r}: negative dimension in shape {list(shape)}", tensors=(name,)
        )
    count = int(np.prod([max(d, 0) for d in shape], dtype=object)) if shape else 1
    if count > MAX_TENSOR_ELEMENTS:
        raise TosaSizeError(
            f"tensor {name!r}: declared shape {list(shape)} has {count} elements (limit {MAX_TENSOR_ELEMENTS})"
        )
    data = None
    if not fb_tensor.DataIsNone() and fb_tensor.DataLength() > 0:
        data = decode_constant(fb_tensor.DataAsNumpy().tobytes(), info.name, shape)
    variable = bool(fb_tensor.Variable())
    vname = fb_tensor.VariableName()
    return Tensor(
        name=name,
        shape=shape,
        dtype=info.name,
        data=data,
        variable=variable,
        variable_name=vname.decode("utf8") if vname else "",
        unranked=bool(fb_tensor.IsUnranked()),
    )


def _read_block(fb_block, op_names: dict[int, str]) -> Block:
    tensors: dict[str, Tensor] = {}
    for j in range(fb_block.TensorsLength()):
        t = _read_tensor(fb_block.Tensors(j))
        tensors[t.name] = t
    shapes: dict[str, Tensor] = {}
    for j in range(fb_block.ShapesLength()):
        s = fb_block.Shapes(j)
        name = s.Name().decode("utf8")
        rank = int(s.Rank())
        data = None
        if not s.DataIsNone() and s.DataLength() > 0:
            data = decode_constant(s.DataAsNumpy().tobytes(), "SHAPE", (rank,))
        shapes[name] = Tensor(name=name, shape=(rank,), dtype="SHAPE", data=data)
    operators = []
    for j in range(fb_block.OperatorsLength()):
        fb_op = fb_block.Operators(j)
        code = fb_op.Op()
        op_name = op_names.get(code)
        if op_name is None:
            raise TosaUnsupportedError(f"operator {j}: unknown op code {code}")
        location = fb_op.Location()
        operators.append(
            Operator(
                op=op_name,
                attrs=_read_attributes(fb_op, op_name),
                inputs=[fb_op.Inputs(k).decode("utf8") for k in range(fb_op.InputsLength())],
                outputs=[fb_op.Outputs(k).decode("utf8") for k in range(fb_op.OutputsLength())],
                location=(location.Text() or b"").decode("utf8") if location else "",
            )
        )
    return Block(
        name=(fb_block.Name() or b"").decode("utf8"),
        operators=operators,
        tensors=tensors,
        inputs=[fb_block.Inputs(k).decode("utf8") for k in range(fb_block.InputsLength())],
        outputs=[fb_block.Outputs(k).decode("utf8") for k in range(fb_block.OutputsLength())],
        shapes=shapes,
    )


class _BoundedBytes(bytes):
    """Flatbuffer bytes whose slices may not run past the end.

    The flatbuffers runtime reads a string as ``Bytes[start:start + length]``; on a truncated
    file Python slicing silently returns a shorter string (a block or tensor name cut short),
    so the reader would accept the file. Numbers and vectors already fail loudly (struct.error,
    numpy ValueError); this closes the gap for strings.
    """

    def __getitem__(self, key):
        if isinstance(key, slice) and key.stop is not None and key.stop > len(self):
            raise IndexError(f"read of bytes {key.start}..{key.stop} past the end of the buffer")
        return super().__getitem__(key)


def parse(data: bytes) -> Graph:
    """Parse TOSA flatbuffer bytes into a :class:`Graph`.

    >>> parse(b"not a graph")
    Traceback (most recent call last):
    ...
    tosa_verify.errors.TosaFormatError: not a TOSA flatbuffer: file identifier is not 'TOSA' (11 bytes)
    """
    import tosa.Op as op_enum
    import tosa.TosaGraph as tosa_graph

    if len(data) < 8 or not tosa_graph.TosaGraph.TosaGraphBufferHasIdentifier(data, 0):
        raise TosaFormatError(
            f"not a TOSA flatbuffer: file identifier is not 'TOSA' ({len(data)} bytes)"
        )
    op_names = {v: k for k, v in vars(op_enum.Op).items() if not k.startswith("_")}
    try:
        fb = tosa_graph.TosaGraph.GetRootAs(_BoundedBytes(data), 0)
        ver = fb.Version()
        if ver is None:
            raise TosaFormatError("TOSA flatbuffer has no version table")
        version = (int(ver._Major()), int(ver._Minor()), int(ver._Patch()), bool(ver._Draft()))
        regions = []
        for i in range(fb.RegionsLength()):
            fb_region = fb.Regions(i)
            blocks = [_read_block(fb_region.Blocks(j), op_names) for j in range(fb_region.BlocksLength())]
            regions.append(Region(name=(fb_region.Name() or b"").decode("utf8"), blocks=blocks))
    except TosaError:
        raise
    except Exception as exc:  # flatbuffers raises struct.error/IndexError/UnicodeError on corruption
        raise TosaFormatError(
            f"corrupt or truncated TOSA flatbuffer ({len(data)} bytes): {type(exc).__name__}: {exc}"
        ) from None
    if version[0] != 1 or version[1] not in (0, 1):
        # 1.1 is the draft the installed tosa-tools writes (its extra operators live in ops/).
        raise TosaFormatError(
            f"TOSA version {version[0]}.{version[1]}.{version[2]} is not supported (need 1.0.x or 1.1.x)"
        )
    if not regions or not regions[0].blocks:
        raise TosaFormatError("TOSA graph has no region or no basic block")
    return Graph(version=version, regions=regions, raw=bytes(data))


def load(source: str | os.PathLike | bytes | bytearray | memoryview | Graph) -> Graph:
    """Load a TOSA graph from a path, bytes, or pass a :class:`Graph` through.

    >>> g = load("tests/data/add.tosa")   # doctest: +SKIP
    >>> g.version_string                  # doctest: +SKIP
    '1.0.0'
    """
    if isinstance(source, Graph):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse(bytes(source))
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TosaFormatError(f"cannot read TOSA file {str(path)!r}: {exc.strerror}") from None
    return parse(data)
