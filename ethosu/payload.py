"""The Vela binary stream: how a compiled Ethos-U network travels inside an ExecuTorch ``.pte``.

ExecuTorch's Ethos-U runtime reads a delegate payload made of named blocks. Each block is a
32-byte header -- the name (UTF-8, at most 15 bytes, NUL-padded to 16), the unpadded data
length (little-endian uint32), an external-data flag byte and 11 reserved zero bytes -- then
the data, zero-padded to a multiple of 16 bytes. The blocks come in this order:

==================  ==========================================================================
``vela_bin_stream`` empty; marks the start
``cmd_data``        Vela's command stream
``weight_data``     Vela's encoded weights and constants
``scratch_size``    uint32: bytes of scratch memory the network needs
``inputs``          int32 count, then per tensor nine int32: the 6-D shape, element size in
                    bytes, offset in its memory region, region number
``outputs``         the same for the outputs
``vela_end_stream`` empty; marks the end
==================  ==========================================================================

:func:`write_vela_bin_stream` builds that payload from an :class:`ethosu.compiler.NpuProgram`;
:func:`read_vela_bin_stream` splits a payload into its blocks and :func:`read_vela_io`
decodes an ``inputs``/``outputs`` block.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ethosu.compiler import NpuProgram, NpuTensor

__all__ = [
    "BLOCK_ORDER",
    "pack_vela_io",
    "read_vela_bin_stream",
    "read_vela_io",
    "write_vela_bin_stream",
]

#: Block names, in the order the runtime expects them.
BLOCK_ORDER = (
    "vela_bin_stream",
    "cmd_data",
    "weight_data",
    "scratch_size",
    "inputs",
    "outputs",
    "vela_end_stream",
)

_HEADER = struct.Struct("<16sIB11s")  # name, data length, external flag, reserved
_ALIGN = 16
_SHAPE_DIMS = 6
_IO_COUNT = struct.Struct("<i")
_IO_TENSOR = struct.Struct("<9i")  # 6 shape dims, element size, offset, region


def _block(name: str, data: bytes) -> bytes:
    raw_name = name.encode("utf-8")[:15]
    header = _HEADER.pack(raw_name.ljust(16, b"\0"), len(data), 0, bytes(11))
    return header + data + bytes(-len(data) % _ALIGN)


def pack_vela_io(tensors: Sequence[NpuTensor]) -> bytes:
    """The ``inputs``/``outputs`` block: an int32 count, then nine int32 per tensor.

    Shapes shorter than 6-D are padded with leading ones (Vela always reports 6-D shapes).

    Example:
        >>> data = pack_vela_io([NpuTensor((1, 1, 1, 3, 16, 16), 1, 1, 768)])
        >>> len(data), read_vela_io(data)[0].offset
        (40, 768)
    """
    out = bytearray(_IO_COUNT.pack(len(tensors)))
    for t in tensors:
        shape = [int(d) for d in t.shape]
        if len(shape) > _SHAPE_DIMS:
            raise ValueError(f"Vela I/O shape {tuple(shape)} has more than {_SHAPE_DIMS} dimensions")
        shape = [1] * (_SHAPE_DIMS - len(shape)) + shape
        out += _IO_TENSOR.pack(*shape, int(t.element_size), int(t.offset), int(t.region))
    return bytes(out)


def write_vela_bin_stream(program: NpuProgram) -> bytes:
    """The delegate payload ExecuTorch's Ethos-U runtime reads, for a compiled ``program``.

    Example:
        >>> from ethosu.compiler import compile_tosa
        >>> payload = write_vela_bin_stream(compile_tosa("net.tosa", "ethos-u55-128"))  # doctest: +SKIP
        >>> list(read_vela_bin_stream(payload))                                         # doctest: +SKIP
        ['vela_bin_stream', 'cmd_data', 'weight_data', 'scratch_size', 'inputs', 'outputs', 'vela_end_stream']
    """
    blocks = {
        "vela_bin_stream": b"",
        "cmd_data": bytes(program.command_stream),
        "weight_data": bytes(program.weights),
        "scratch_size": struct.pack("<I", int(program.scratch_size)),
        "inputs": pack_vela_io(program.inputs),
        "outputs": pack_vela_io(program.outputs),
        "vela_end_stream": b"",
    }
    return b"".join(_block(name, blocks[name]) for name in BLOCK_ORDER)


def read_vela_bin_stream(payload: bytes) -> dict[str, bytes]:
    """Split a Vela binary stream into its named blocks (unpadded data, in payload order).

    Reading stops after ``vela_end_stream``; a payload that is cut short (a truncated block,
    or no ``vela_end_stream``) raises ``ValueError``.

    Example:
        >>> blocks = read_vela_bin_stream(_block("cmd_data", b"COP1") + _block("vela_end_stream", b""))
        >>> blocks
        {'cmd_data': b'COP1', 'vela_end_stream': b''}
    """
    blocks: dict[str, bytes] = {}
    pos = 0
    while pos + _HEADER.size <= len(payload):
        raw_name, length, _external, _reserved = _HEADER.unpack_from(payload, pos)
        pos += _HEADER.size
        if pos + length > len(payload):
            raise ValueError(f"Vela binary stream block {raw_name!r} at byte {pos - _HEADER.size} "
                             "is truncated")
        name = raw_name.split(b"\0", 1)[0].decode("utf-8")
        blocks[name] = bytes(payload[pos : pos + length])
        pos += length + (-length % _ALIGN)
        if name == "vela_end_stream":
            return blocks
    raise ValueError(f"Vela binary stream of {len(payload)} bytes ends without vela_end_stream "
                     "(truncated?)")


def read_vela_io(data: bytes) -> list[NpuTensor]:
    """Decode an ``inputs``/``outputs`` block into :class:`~ethosu.compiler.NpuTensor` values.

    Example:
        >>> read_vela_io(pack_vela_io([NpuTensor((1, 1, 1, 1, 1, 10), 1, 1, 16)]))
        [NpuTensor(shape=(1, 1, 1, 1, 1, 10), element_size=1, region=1, offset=16)]
    """
    (count,) = _IO_COUNT.unpack_from(data, 0)
    if count < 0 or len(data) < _IO_COUNT.size + count * _IO_TENSOR.size:
        raise ValueError(f"Vela I/O block of {len(data)} bytes cannot hold {count} tensors")
    tensors = []
    for i in range(count):
        *shape, element_size, offset, region = _IO_TENSOR.unpack_from(
            data, _IO_COUNT.size + i * _IO_TENSOR.size
        )
        tensors.append(NpuTensor(tuple(shape), element_size, region, offset))
    return tensors
