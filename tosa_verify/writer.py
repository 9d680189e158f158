"""Turn a :class:`tosa_verify.Graph` back into TOSA flatbuffer bytes with ``tosa_serializer``.

This is the inverse of :func:`tosa_verify.graph.parse`: regions, basic blocks, tensors (with their
constant data), shape values and operators (with attributes and locations) are re-emitted
through the serializer shipped in tosa-tools, so the result is readable by both our parser and the
reference model. It is used to rewrite graphs (every tensor a block output, for capture) and to
cut one operator out of a graph (diff repros).

>>> from tosa_verify.writer import to_flatbuffer
>>> data = to_flatbuffer(load("model.tosa"))   # doctest: +SKIP
>>> load(data).main.operators == load("model.tosa").main.operators   # doctest: +SKIP
True

Notes

* The entry region and its first block are always written under the name ``main`` (the
  serializer creates them with that name and cannot rename them); other regions keep their names.
* ``tosa_serializer`` refuses INT4 constants equal to -8: the spec's int4_t range is [-7, 7].
  A graph that holds -8 anyway is still written faithfully (placeholder, then the packed bytes
  are patched into the buffer), but note the reference model zeroes such a constant silently.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from .dtypes import dtype_info, split_block_scaled
from .errors import TosaUnsupportedError
from .graph import Block, Graph, Operator, Tensor, load

__all__ = ["attribute_for", "load", "to_flatbuffer"]


def _ts():
    import tosa_serializer

    return tosa_serializer


@cache
def _attribute_methods() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Normalized op name -> (serializer attribute method, its parameter names)."""
    ts = _ts()
    table: dict[str, tuple[str, tuple[str, ...]]] = {}
    for meth in dir(ts.TosaSerializerAttribute):
        if not meth.endswith("Attribute") or meth.startswith("_"):
            continue
        doc = (getattr(ts.TosaSerializerAttribute, meth).__doc__ or "").splitlines()
        first = doc[0] if doc else ""
        match = re.match(rf"{meth}\((.*)\)\s*->", first)
        params: tuple[str, ...] = ()
        if match:
            params = tuple(re.findall(r"(\w+):", match.group(1)))
            params = tuple(p for p in params if p != "self")
        key = meth[: -len("Attribute")].replace("_", "").lower()
        table[key] = (meth, params)
    return table


def _convert_attr_value(ts, key: str, value: object) -> object:
    if key == "rounding_mode":
        return ts.RoundingMode.__members__[value] if isinstance(value, str) else ts.RoundingMode(value)
    if key == "nan_mode":
        return (
            ts.NanPropagationMode.__members__[value]
            if isinstance(value, str)
            else ts.NanPropagationMode(value)
        )
    if key == "mode":
        return ts.ResizeMode.__members__[value] if isinstance(value, str) else ts.ResizeMode(value)
    if key == "acc_type":
        if isinstance(value, str):
            return ts.DType.__members__[value]
        return ts.DType(int(value))
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, np.ndarray):
        return [int(v) for v in value.ravel()]
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return value


def attribute_for(operator: Operator):
    """Build the ``tosa_serializer`` attribute object of ``operator`` from its parsed ``attrs``.

    Attribute parameters are matched by name: the parser stores flatbuffer fields in snake_case,
    which is also how the serializer's bindings name its parameters.

    >>> attribute_for(Operator("TRANSPOSE", {"perms": [1, 0]}, ["a"], ["b"]))   # doctest: +ELLIPSIS
    <tosa_serializer...TosaSerializerAttribute object at ...>
    """
    ts = _ts()
    attr = ts.TosaSerializerAttribute()
    entry = _attribute_methods().get(operator.op.replace("_", "").lower())
    if entry is None:
        if operator.attrs:
            raise TosaUnsupportedError(f"{operator.op}: no serializer attribute for {sorted(operator.attrs)}")
        attr.NoneAttribute()
        return attr
    meth, params = entry
    args = []
    for name in params:
        if name not in operator.attrs:
            raise TosaUnsupportedError(
                f"{operator.op}: attribute {name!r} missing (have {sorted(operator.attrs)})"
            )
        args.append(_convert_attr_value(ts, name, operator.attrs[name]))
    getattr(attr, meth)(*args)
    return attr


def _tensor_data(tensor: Tensor) -> tuple[object, bool]:
    """Data in the form the serializer accepts, and whether an INT4 patch is needed."""
    data = tensor.data
    if data is None:
        return None, False
    info = dtype_info(tensor.dtype)
    flat = np.ascontiguousarray(data).reshape(-1)
    if info.name == "INT4":
        needs_patch = bool((flat == -8).any())
        return [int(v) if v != -8 else 0 for v in flat], needs_patch
    if info.name == "BOOL":
        return flat.astype(bool), False
    if flat.dtype.kind == "V":  # raw BF16/FP8 view: reinterpret as the working dtype
        flat = flat.view(info.working)
    return flat.astype(info.working, copy=False), False


def _add_block_scaled(ts, sblock, tensor: Tensor) -> None:
    """Declare a block-scaled tensor: value type, ScaleType and BlockShape from its composite
    dtype, constant values in ``Data`` and scales in ``ScaleData``."""
    info = dtype_info(tensor.dtype)
    data = scales = None
    if tensor.data is not None:
        values, scale_values = split_block_scaled(tensor.data, tensor.dtype)
        data = _tensor_data(Tensor(tensor.name, tensor.shape, info.value, values))[0]
        scales = _tensor_data(Tensor(tensor.name, scale_values.shape, info.scale, scale_values))[0]
    sblock.addTensor(tensor.name, list(tensor.shape), ts.ScaledDType.__members__[tensor.dtype], data, scales,
                     "", "", tensor.unranked, tensor.variable, tensor.variable_name)


def _pack_int4(values: np.ndarray) -> bytes:
    flat = np.asarray(values, dtype=np.int64).reshape(-1) & 0x0F
    if flat.size % 2:
        flat = np.concatenate([flat, [0]])
    return bytes((flat[0::2] | (flat[1::2] << 4)).astype(np.uint8))


def _emit_block(ts, sblock, block: Block, patches: list[tuple[str, str, np.ndarray]]) -> None:
    for tensor in block.tensors.values():
        if dtype_info(tensor.dtype).block:
            _add_block_scaled(ts, sblock, tensor)
            continue
        data, patch = _tensor_data(tensor)
        dtype = ts.DType.__members__[tensor.dtype]
        sblock.addTensor(
            tensor.name,
            list(tensor.shape),
            dtype,
            data,
            "",
            tensor.unranked,
            tensor.variable,
            tensor.variable_name,
        )
        if patch:
            patches.append((block.name, tensor.name, tensor.data))
    for shape in block.shapes.values():
        rank = shape.shape[0] if shape.shape else 0
        data = None if shape.data is None else [int(v) for v in np.asarray(shape.data).reshape(-1)]
        if data == [] and rank == 0:
            data = [0]  # as the reference tools write an empty shape value (one padding int64)
        sblock.addShape(shape.name, rank, data)
    for name in block.inputs:
        sblock.addInput(name)
    for name in block.outputs:
        sblock.addOutput(name)
    for op in block.operators:
        code = ts.Op.__members__.get(op.op)
        if code is None:
            raise TosaUnsupportedError(f"operator {op.op} is not known to tosa_serializer")
        location = ts.TosaOpLocation(op.location) if op.location else None
        sblock.addOperator(code, list(op.inputs), list(op.outputs), attribute_for(op), location)


def _apply_int4_patches(data: bytes, patches: list[tuple[str, str, np.ndarray]]) -> bytes:
    """Overwrite the packed bytes of INT4 constants the serializer could not take as given."""
    if not patches:
        return data
    import tosa.TosaGraph as tosa_graph

    buf = bytearray(data)
    fb = tosa_graph.TosaGraph.GetRootAs(buf, 0)
    wanted = {(b, t): v for b, t, v in patches}
    for i in range(fb.RegionsLength()):
        region = fb.Regions(i)
        for j in range(region.BlocksLength()):
            fb_block = region.Blocks(j)
            bname = (fb_block.Name() or b"").decode()
            for k in range(fb_block.TensorsLength()):
                fb_tensor = fb_block.Tensors(k)
                tname = fb_tensor.Name().decode()
                key = (bname, tname)
                if key not in wanted and i == 0 and j == 0:
                    key = next((w for w in wanted if w[1] == tname), key)
                if key in wanted:
                    view = fb_tensor.DataAsNumpy()  # a writable view into ``buf``
                    packed = np.frombuffer(_pack_int4(wanted[key]), dtype=np.uint8)
                    view[: packed.size] = packed
    return bytes(buf)


def to_flatbuffer(graph: Graph) -> bytes:
    """Serialize ``graph`` to TOSA flatbuffer bytes (same TOSA version as the graph).

    >>> from tosa_verify.graph import Region
    >>> t = Tensor("x", (2,), "INT8")
    >>> g = Graph((1, 0, 0, False), [Region("main", [Block("main", [], {"x": t}, ["x"], ["x"])])])
    >>> load(to_flatbuffer(g)).main.inputs
    ['x']
    """
    ts = _ts()
    major, minor, patch, draft = graph.version
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED, major, minor, patch, draft)
    patches: list[tuple[str, str, np.ndarray]] = []
    for r_index, region in enumerate(graph.regions):
        if r_index > 0:
            ser.startRegion(region.name)
        sregion = ser.currRegion
        for b_index, block in enumerate(region.blocks):
            if not (r_index == 0 and b_index == 0):
                sregion.addBasicBlock(block.name)
            _emit_block(ts, sregion.currBasicBlock, block, patches)
    if patches:
        # the entry block is renamed "main" by the serializer
        entry = graph.regions[0].blocks[0].name
        patches = [("main" if b == entry else b, t, v) for b, t, v in patches]
    return _apply_int4_patches(bytes(ser.serialize()), patches)

