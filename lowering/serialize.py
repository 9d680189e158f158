"""The only module that talks to ``tosa_serializer``.

:class:`TosaWriter` builds one TOSA 1.0.0 graph with named tensors: the main region, plus one
region (of one basic block) per control-flow sub-graph (:meth:`TosaWriter.start_block`); every
operator gets a name-bearing output so provenance can map TOSA tensors back to FX nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch
import tosa_serializer as ts

TOSA_VERSION = (1, 0, 0)

DType = ts.DType
Op = ts.Op

NP_OF = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT48": np.int64,
    "FP32": np.float32,
    "FP16": np.float16,
    "SHAPE": np.int64,
}

#: torch integer dtype -> the TOSA integer type of the same width.
INT_OF = {torch.int8: "INT8", torch.int16: "INT16", torch.int32: "INT32"}

TORCH_TO_TOSA = {
    torch.float32: "FP32",
    torch.float16: "FP16",
    torch.int8: "INT8",
    torch.int16: "INT16",
    torch.int32: "INT32",
    torch.int64: "INT32",  # int64 is narrowed by the int64 passes
    torch.bool: "BOOL",
    torch.uint8: "INT8",
}


def dtype_of(name: str):
    """``"INT8"`` -> ``ts.DType.INT8``.

    Example:
        >>> dtype_of("INT8") == ts.DType.INT8
        True
    """
    return getattr(ts.DType, name)


class TosaWriter:
    """Accumulates tensors and operators and serializes a TOSA 1.0.0 flatbuffer.

    Example:
        >>> w = TosaWriter()
        >>> w.input("x", [2], "FP32")
        'x'
        >>> w.op("ABS", ["x"], w.tensor("y", [2], "FP32"))
        >>> w.output("y")
        >>> import tosa_reference_model as trm
        >>> out, st = trm.run(w.serialize(), [np.array([-1.0, 2.0], np.float32)])
        >>> out[0].tolist()
        [1.0, 2.0]
    """

    def __init__(self, version: tuple[int, int, int] = TOSA_VERSION):
        major, minor, patch = version
        self._g = ts.TosaSerializer(
            "", targetMajor=major, targetMinor=minor, targetPatch=patch, targetDraft=False
        )
        self.names: set[str] = set()
        self.shapes: dict[str, list[int]] = {}
        self.dtypes: dict[str, str] = {}
        self.op_counts: Counter = Counter()
        #: inputs / outputs of the main block (the graph's signature)
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        #: inputs / outputs of the block being written (the main block's lists until
        #: :meth:`start_block`)
        self.block_inputs: list[str] = self.inputs
        self.block_outputs: list[str] = self.outputs
        self.op_log: list[tuple[str, list[str], list[str]]] = []

    # -- names ---------------------------------------------------------------
    def unique(self, name: str) -> str:
        name = name.replace(".", "_").replace(":", "_")
        if name not in self.names:
            return name
        i = 1
        while f"{name}_{i}" in self.names:
            i += 1
        return f"{name}_{i}"

    def _register(self, name: str, shape, dtype: str) -> str:
        self.names.add(name)
        self.shapes[name] = [int(s) for s in shape]
        self.dtypes[name] = dtype
        return name

    # -- tensors -------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int], dtype: str) -> str:
        name = self.unique(name)
        t = ts.TosaSerializerTensor(name, [int(s) for s in shape], dtype_of(dtype), data=None)
        self._g.addInputTensor(t)
        self.block_inputs.append(name)
        return self._register(name, shape, dtype)

    def tensor(self, name: str, shape: Sequence[int], dtype: str) -> str:
        """Declare an intermediate tensor and return its (unique) name."""
        name = self.unique(name)
        self._g.currRegion.currBasicBlock.addTensor(name, [int(s) for s in shape], dtype_of(dtype))
        return self._register(name, shape, dtype)

    def const(self, name: str, values, dtype: str, shape: Sequence[int] | None = None) -> str:
        """Declare a constant tensor (values are cast to the numpy type of ``dtype``)."""
        name = self.unique(name)
        arr = np.asarray(values)
        if shape is None:
            shape = list(arr.shape) if arr.ndim else [1]
        arr = arr.astype(NP_OF[dtype]).reshape(shape) if arr.size else arr.astype(NP_OF[dtype])
        self._g.addConst([int(s) for s in shape], dtype_of(dtype), arr, name=name)
        return self._register(name, shape, dtype)

    def const_shape(self, name: str, values: Sequence[int]) -> str:
        vals = np.array([int(v) for v in values], dtype=np.int64)
        return self.const(name, vals, "SHAPE", [len(vals)])

    def output(self, name: str) -> None:
        self._g.addOutputTensor(self._g.currRegion.currBasicBlock.tensors[name])
        self.block_outputs.append(name)

    def reserve(self, name: str) -> str:
        """A unique name kept for a region to be written later (:meth:`start_block`)."""
        name = self.unique(name)
        self.names.add(name)
        return name

    def start_block(self, name: str) -> None:
        """Write what follows into a new region ``name`` of one basic block ``name`` (a
        COND_IF branch, a WHILE_LOOP condition or body), with its own inputs and outputs.

        Regions are written after the main block is complete: the serializer cannot return
        to an earlier region.

        Example:
            >>> w = TosaWriter(); _ = w.input("c", [1], "BOOL"); _ = w.input("x", [2], "FP32")
            >>> _ = w.tensor("y", [2], "FP32")
            >>> w.op("COND_IF", ["c", "x"], "y", then_graph="t", else_graph="e"); w.output("y")
            >>> for region, op in (("t", "ABS"), ("e", "ABS")):
            ...     w.start_block(region); _ = w.input(region + "_x", [2], "FP32")
            ...     w.op(op, [region + "_x"], w.tensor(region + "_y", [2], "FP32"))
            ...     w.output(region + "_y")
            >>> w.inputs, w.block_inputs
            (['c', 'x'], ['e_x'])
            >>> import tosa_reference_model as trm
            >>> out, _ = trm.run(w.serialize(), [np.array([True]), np.array([-1.0, 2.0], np.float32)])
            >>> out[0].tolist()
            [1.0, 2.0]
        """
        self._g.startRegion(name)
        self._g.currRegion.addBasicBlock(name)
        self.block_inputs, self.block_outputs = [], []

    # -- operators -----------------------------------------------------------
    def op(self, op: str, inputs: Sequence[str], outputs: str | Sequence[str],
           attr: str | None = None, **attr_kwargs) -> None:
        """Add operator ``op`` (e.g. ``"CONV2D"``). ``attr`` defaults to ``<Op>Attribute``
        in CamelCase; keyword args are passed to the attribute builder."""
        if isinstance(outputs, str):
            outputs = [outputs]
        a = ts.TosaSerializerAttribute()
        attr_name = attr or _attr_name(op)
        for k, v in list(attr_kwargs.items()):
            if isinstance(v, str) and k in ("acc_type",):
                attr_kwargs[k] = dtype_of(v)
            elif k == "nan_mode" and isinstance(v, str):
                attr_kwargs[k] = getattr(ts.NanPropagationMode, v)
            elif k == "rounding_mode" and isinstance(v, str):
                attr_kwargs[k] = getattr(ts.RoundingMode, v)
            elif k == "mode" and isinstance(v, str):
                attr_kwargs[k] = getattr(ts.ResizeMode, v)
        getattr(a, attr_name)(**attr_kwargs)
        self._g.addOperator(getattr(ts.Op, op), list(inputs), list(outputs), a)
        self.op_counts[op] += 1
        self.op_log.append((op, list(inputs), list(outputs)))

    def serialize(self) -> bytes:
        return bytes(self._g.serialize())


_ATTR_SPECIAL = {
    "CONV2D": "Conv2dAttribute",
    "CONV3D": "Conv3dAttribute",
    "DEPTHWISE_CONV2D": "DepthwiseConv2dAttribute",
    "TRANSPOSE_CONV2D": "TransposeConv2dAttribute",
    "AVG_POOL2D": "AvgPool2dAttribute",
    "MAX_POOL2D": "MaxPool2dAttribute",
    "MATMUL": "MatMulAttribute",
    "ARGMAX": "ArgMaxAttribute",
    "INTDIV": "IntDivAttribute",
}


def _attr_name(op: str) -> str:
    if op in _ATTR_SPECIAL:
        return _ATTR_SPECIAL[op]
    return "".join(p.capitalize() for p in op.split("_")) + "Attribute"


def clamp_bytes(value, dtype: str) -> list[int]:
    """CLAMP bounds are serialized as the little-endian bytes of the value.

    Example:
        >>> clamp_bytes(-1, "INT8")
        [255]
    """
    return list(np.array([value], dtype=NP_OF[dtype]).view(np.uint8).tolist())


def read_tosa_ops(buf: bytes) -> list[str]:
    """Operator names of a serialized TOSA graph (via the ``tosa`` flatbuffer reader).

    Example:
        >>> w = TosaWriter(); _ = w.input("x", [1], "FP32"); _ = w.tensor("y", [1], "FP32")
        >>> w.op("ABS", ["x"], "y"); w.output("y")
        >>> read_tosa_ops(w.serialize())
        ['ABS']
    """
    import tosa.Op as OpMod
    from tosa.TosaGraph import TosaGraph

    names = {v: k for k, v in vars(OpMod.Op).items() if not k.startswith("_")}
    g = TosaGraph.GetRootAsTosaGraph(buf, 0)
    ops = []
    for r in range(g.RegionsLength()):
        reg = g.Regions(r)
        for b in range(reg.BlocksLength()):
            blk = reg.Blocks(b)
            for i in range(blk.OperatorsLength()):
                ops.append(names.get(blk.Operators(i).Op(), "?"))
    return ops
