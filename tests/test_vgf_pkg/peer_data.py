"""ExecuTorch's MobileNetV2 lowerings shipped as test data, so the default run needs no ExecuTorch.

ExecuTorch's lowering of the 224x224 width-1.0 MobileNetV2 costs 60-95 CPU seconds per profile
(``docs/vgf.md``), too much for the default test run on a fresh clone. Its TOSA flatbuffers are
14 MB (FP) and 3.8 MB (INT), and random weights do not compress (xz: 12.5 MB for the FP graph).
But those weights are not information: the model is built in code with seeded random weights,
so they can be recomputed from it. What is shipped, per graph, under ``tests/data/peer/``:

* ``<name>.residual.xz``: the flatbuffer with each large weight tensor's bytes XOR-ed with the
  bytes predicted from the seeded model (the conv weights with their BatchNorm folded in, laid
  out OHWI or HWCM, and for INT quantized per channel as ExecuTorch's quantizer does) -- zeros
  where the prediction is right, so the residual compresses to the graph's structure;
* an entry of ``peer_graphs.json``: where each predicted tensor lies in the file, its source
  module and layout, and the SHA-256 and size of the original flatbuffer.

:func:`shipped_tosa` rebuilds the exact bytes and checks the SHA-256: a prediction that is off
only makes the residual larger, never the graph different. The slow test
``test_vgf_peer.py::test_shipped_peer_graphs_are_what_executorch_lowers_today`` lowers again
with ExecuTorch and compares, so the data cannot go stale; ``python -m tests.test_vgf_pkg.peer_data``
regenerates it (about 3 CPU minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "peer"
MANIFEST = DATA_DIR / "peer_graphs.json"
#: graph name -> (profile, full): the full 224x224 width-1.0 network or the reduced one
GRAPHS = {
    "mobilenet_v2-INT-full": ("INT", True),
    "mobilenet_v2-FP-full": ("FP", True),
    "mobilenet_v2-FP-reduced": ("FP", False),
}
#: weight layouts ExecuTorch writes, as permutations of torch's OIHW
_LAYOUTS = {"ohwi": (0, 2, 3, 1), "hwcm": (2, 3, 0, 1)}
_MIN_ELEMENTS = 256  # smaller constants stay in the residual as they are


class PeerDataError(RuntimeError):
    """The shipped peer graph cannot be rebuilt, or is not what ExecuTorch lowers today."""


@dataclass(frozen=True)
class Recipe:
    """One predicted weight tensor: its bytes at ``offset`` come from module ``source`` in ``layout``."""

    tensor: str
    source: str
    layout: str
    dtype: str
    offset: int


def mobilenet_v2(full: bool):
    """``(model, example)`` of the peer graphs: seeded weights, eval mode.

    ``full``: MobileNetV2 width 1.0 at 224x224 (the network of ``benchmarks/bench_interpreter.py``).
    Otherwise the same class with ``SETTINGS[:2]``, width 0.35, 10 classes, at 32x32: the stem
    conv, an expansion-1 block (depthwise + pointwise), a strided and a residual expansion-6 block,
    the last 1x1 conv, global pooling and the classifier -- every operator kind of the full
    network at about a fifth of its operators.

    Example:
        >>> model, (x,) = mobilenet_v2(full=False)
        >>> tuple(model(x).shape)
        (1, 10)
    """
    import torch

    from lowering.zoo import MobileNetV2

    torch.manual_seed(0)
    if full:
        model, size = MobileNetV2(1.0), 224
    else:
        reduced = type("MobileNetV2Reduced", (MobileNetV2,), {"SETTINGS": MobileNetV2.SETTINGS[:2]})
        model, size = reduced(0.35, num_classes=10), 32
    example = (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(7)),)
    return model.eval(), example


def folded_weights(model) -> dict[str, np.ndarray]:
    """Every conv's weight with its BatchNorm folded in, and the linear weights, as float32 OIHW.

    The fold is ``w * (gamma / sqrt(var + eps))`` per output channel, in float32. On the seeded
    model (default BatchNorm statistics) it gives ExecuTorch's folded FP weights bit for bit; where
    a rounding differed, the residual would carry the difference (only its size would grow).

    Example:
        >>> sorted(folded_weights(mobilenet_v2(False)[0]))[0]
        'classifier.1'
    """
    import torch

    out: dict[str, np.ndarray] = {}
    pending: tuple[str, torch.nn.Conv2d] | None = None
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Conv2d):
                pending = (name, mod)
                out[name] = mod.weight.numpy().copy()
            elif isinstance(mod, torch.nn.BatchNorm2d) and pending is not None:
                scale = mod.weight / torch.sqrt(mod.running_var + mod.eps)
                out[pending[0]] = (pending[1].weight * scale.reshape(-1, 1, 1, 1)).numpy()
                pending = None
            elif isinstance(mod, torch.nn.Linear):
                out[name] = mod.weight.numpy()[:, :, None, None].copy()
    return out


def _quantize_per_channel(w: np.ndarray) -> np.ndarray:
    """Symmetric int8 per output channel (axis 0), as the PT2E per-channel observer: scale amax/127."""
    amax = np.abs(w).reshape(w.shape[0], -1).max(axis=1).astype(np.float32)
    scale = np.maximum(amax / np.float32(127.0), np.finfo(np.float32).eps).reshape(-1, *([1] * (w.ndim - 1)))
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8)


def predict(weight: np.ndarray, layout: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The tensor ExecuTorch is expected to write for a folded OIHW ``weight``.

    Example:
        >>> predict(np.ones((2, 3, 1, 1), np.float32), "ohwi", "FP32", (2, 1, 1, 3)).shape
        (2, 1, 1, 3)
    """
    value = _quantize_per_channel(weight) if dtype == "INT8" else weight.astype(np.float32)
    return np.ascontiguousarray(value.transpose(_LAYOUTS[layout])).reshape(shape)


def _raw(value: np.ndarray, dtype: str) -> bytes:
    return np.ascontiguousarray(value).astype("<f4" if dtype == "FP32" else np.int8).tobytes()


def _best_recipe(name: str, const: np.ndarray, dtype: str, data: bytes,
                 weights: dict[str, np.ndarray]) -> Recipe | None:
    """The source and layout predicting ``const`` best (most equal elements), or None."""
    raw = _raw(const, dtype)
    offset = data.find(raw)
    if offset < 0 or data.find(raw, offset + 1) >= 0:
        return None  # not found verbatim, or not unique: leave it in the residual
    best: tuple[float, Recipe] | None = None
    for source, weight in weights.items():
        for layout, perm in _LAYOUTS.items():
            if weight.size != const.size or tuple(weight.shape[p] for p in perm)[:2] != const.shape[:2]:
                continue
            score = float(np.mean(predict(weight, layout, dtype, const.shape) == const))
            if best is None or score > best[0]:
                best = (score, Recipe(name, source, layout, dtype, offset))
    return best[1] if best is not None and best[0] >= 0.5 else None


def recipes_for(tosa: bytes, weights: dict[str, np.ndarray]) -> list[Recipe]:
    """The predictable weight tensors of a flatbuffer (INT8 and FP32 constants of 256+ elements).

    Example:
        >>> recipes_for(shipped_tosa("mobilenet_v2-FP-reduced"),
        ...             folded_weights(mobilenet_v2(False)[0]))[0].layout     # doctest: +SKIP
        'ohwi'
    """
    import tosa_verify

    block = tosa_verify.load(tosa).main
    found = []
    for name, decl in block.tensors.items():
        if decl.data is None or decl.size < _MIN_ELEMENTS or decl.dtype not in ("INT8", "FP32"):
            continue
        recipe = _best_recipe(name, np.asarray(decl.data), decl.dtype, tosa, weights)
        if recipe is not None:
            found.append(recipe)
    return found


def _apply(buffer: np.ndarray, recipes: list[Recipe], weights: dict[str, np.ndarray],
           shapes: dict[str, tuple[int, ...]]) -> None:
    """XOR each recipe's predicted bytes into ``buffer`` (uint8) in place: packs and unpacks."""
    for r in recipes:
        pred = np.frombuffer(_raw(predict(weights[r.source], r.layout, r.dtype, shapes[r.tensor]), r.dtype),
                             np.uint8)
        buffer[r.offset:r.offset + pred.size] ^= pred


def pack(name: str, tosa: bytes) -> dict:
    """Write ``<name>.residual.xz`` for the flatbuffer ``tosa``; return its manifest entry.

    Example:
        >>> entry = pack("mobilenet_v2-FP-reduced", tosa)     # doctest: +SKIP
        >>> entry["sha256"] == hashlib.sha256(tosa).hexdigest()   # doctest: +SKIP
        True
    """
    import tosa_verify

    profile, full = GRAPHS[name]
    weights = folded_weights(mobilenet_v2(full)[0])
    recipes = recipes_for(tosa, weights)
    block = tosa_verify.load(tosa).main
    shapes = {r.tensor: tuple(block.tensors[r.tensor].shape) for r in recipes}
    buffer = np.frombuffer(tosa, np.uint8).copy()
    _apply(buffer, recipes, weights, shapes)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    (DATA_DIR / f"{name}.residual.xz").write_bytes(lzma.compress(buffer.tobytes(), preset=9))
    return {"profile": profile, "full": full, "size": len(tosa), "sha256": hashlib.sha256(tosa).hexdigest(),
            "recipes": [{**r.__dict__, "shape": list(shapes[r.tensor])} for r in recipes]}


@cache
def shipped_tosa(name: str) -> bytes:
    """The shipped peer graph ``name`` (a key of :data:`GRAPHS`): the exact flatbuffer bytes.

    Raises :class:`PeerDataError` when the file is missing or the rebuilt bytes do not have the
    recorded SHA-256 (e.g. torch's seeded initialisation changed: regenerate the data).

    Example:
        >>> shipped_tosa("mobilenet_v2-FP-reduced")[4:8]
        b'TOSA'
    """
    entries = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    path = DATA_DIR / f"{name}.residual.xz"
    if name not in entries or not path.is_file():
        raise PeerDataError(f"peer graph {name!r}: no {path.name} in {DATA_DIR} (run python -m "
                            f"tests.test_vgf_pkg.peer_data to make it)")
    entry = entries[name]
    buffer = np.frombuffer(lzma.decompress(path.read_bytes()), np.uint8).copy()
    recipes = [Recipe(**{k: v for k, v in r.items() if k != "shape"}) for r in entry["recipes"]]
    shapes = {r["tensor"]: tuple(r["shape"]) for r in entry["recipes"]}
    _apply(buffer, recipes, folded_weights(mobilenet_v2(entry["full"])[0]), shapes)
    data = buffer.tobytes()
    if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise PeerDataError(f"peer graph {name!r}: the rebuilt flatbuffer does not have the recorded "
                            f"SHA-256 (did torch's seeded init change? run python -m tests.test_vgf_pkg.peer_data)")
    return data


def executorch_lowering(name: str) -> bytes:
    """``name`` lowered by ExecuTorch's Arm TOSA backend today (60-95 CPU s for a full graph).

    Example:
        >>> executorch_lowering("mobilenet_v2-FP-reduced") == shipped_tosa("mobilenet_v2-FP-reduced")  # doctest: +SKIP
        True
    """
    import torch

    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    if bench not in sys.path:  # pytest puts it there (pyproject); ``python -m`` does not
        sys.path.append(bench)
    from _peer import executorch_tosa

    torch.set_num_threads(1)
    profile, full = GRAPHS[name]
    return executorch_tosa(*mobilenet_v2(full), profile).tosa


def manifest_text(entries: dict[str, dict]) -> str:
    """``peer_graphs.json``'s text: the graphs sorted by name, one recipe a line (short diffs).

    Example:
        >>> manifest_text({"g": {"size": 1, "recipes": [{"offset": 0}]}})
        '{\\n "g": {\\n  "size": 1,\\n  "recipes": [\\n   {"offset": 0}\\n  ]\\n }\\n}\\n'
    """
    graphs = []
    for name, entry in sorted(entries.items()):
        fields = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in entry.items() if k != "recipes"]
        recipes = ",\n".join(f"   {json.dumps(r)}" for r in entry["recipes"])
        fields.append(f'  "recipes": [\n{recipes}\n  ]')
        graphs.append(f" {json.dumps(name)}: {{\n" + ",\n".join(fields) + "\n }")
    return "{\n" + ",\n".join(graphs) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    """Lower the peer graphs with ExecuTorch and write the shipped data (all, or those named)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"graphs to regenerate (default: all of {', '.join(GRAPHS)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(GRAPHS))
    if unknown:
        parser.error(f"unknown peer graph {unknown[0]!r}: choose from {', '.join(GRAPHS)}")
    entries = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    for name in args.names or list(GRAPHS):
        entries[name] = pack(name, executorch_lowering(name))
        residual = (DATA_DIR / f"{name}.residual.xz").stat().st_size
        print(f"{name}: {entries[name]['size']} bytes, {len(entries[name]['recipes'])} weight tensors "
              f"predicted, residual {residual} bytes", flush=True)
        MANIFEST.write_text(manifest_text(entries))
    shipped_tosa.cache_clear()
    for name in args.names or list(GRAPHS):
        shipped_tosa(name)  # raises when the rebuild is not exact
    return 0


if __name__ == "__main__":
    sys.exit(main())
