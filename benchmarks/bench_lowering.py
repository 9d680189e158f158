"""Our lowering vs ExecuTorch's Arm backend (peer, comparison only) on the zoo.

For every zoo model, in the same run: INT8 TOSA SQNR vs the float model (ours / theirs),
lowering time ratio ours/theirs, and TOSA op counts side by side.

    python benchmarks/bench_lowering.py [model ...]
"""

from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np
import torch

import lowering
from lowering import zoo
from lowering.serialize import read_tosa_ops


def sqnr(ref: torch.Tensor, out: torch.Tensor) -> float:
    ref, out = ref.double().flatten(), out.double().flatten()
    noise = (ref - out).pow(2).sum().item()
    return float("inf") if noise == 0 else 10 * np.log10(ref.pow(2).sum().item() / noise)


def ours(m, ex, cal):
    t = time.perf_counter()
    lm = lowering.lower(m, ex, profile="INT", calibration=cal)
    dt = time.perf_counter() - t
    return lm.tosa, dt, lm.run(*ex)[0]


def theirs(m, ex, cal):
    """ExecuTorch Arm backend: TOSAQuantizer + TOSAPartitioner -> TOSA-1.0+INT flatbuffer."""
    from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    t = time.perf_counter()
    spec = TosaCompileSpec("TOSA-1.0+INT")
    q = TOSAQuantizer(spec)
    q.set_global(get_symmetric_quantization_config(is_per_channel=True))
    gm = torch.export.export(m, ex).module(check_guards=False)
    p = prepare_pt2e(gm, q)
    with torch.no_grad():
        for b in cal:
            p(*b)
    c = convert_pt2e(p)
    ep = torch.export.export(c, ex)
    edge = to_edge_transform_and_lower(ep, partitioner=[TOSAPartitioner(spec)])
    dt = time.perf_counter() - t
    gm2 = edge.exported_program().graph_module
    lowered = [getattr(gm2, n) for n, _ in gm2.named_children() if n.startswith("lowered_module")]
    if len(lowered) != 1:
        return None, dt, None
    tosa = lowered[0].processed_bytes
    # run their graph: find quantization of the delegate I/O from the converted graph
    import tosa_reference_model as trm

    ph = [n for n in c.graph.nodes if n.op == "placeholder"][0]
    qn = next(iter(ph.users))
    s, zp = float(qn.args[1]), int(qn.args[2])
    xq = torch.ops.quantized_decomposed.quantize_per_tensor(ex[0], s, zp, -128, 127, torch.int8)
    x_in = xq.numpy()
    outs, status = trm.run(tosa, [x_in])
    if "VALID" not in str(status):
        return tosa, dt, None
    out_node = c.graph.output_node().args[0][0]
    o_s, o_zp = float(out_node.args[1]), int(out_node.args[2])
    y = (torch.from_numpy(np.asarray(outs[0]).astype(np.float32)) - o_zp) * o_s
    return tosa, dt, y.reshape(m(*ex).shape)


def main(names):
    rows = []
    for name in names:
        m, ex, cal = zoo.MODELS[name]()
        with torch.no_grad():
            ref = m(*ex)
        t_ours, dt_o, y_o = ours(m, ex, cal)
        try:
            t_theirs, dt_t, y_t = theirs(m, ex, cal)
        except Exception as e:  # noqa: BLE001
            print(f"[{name}] ExecuTorch Arm backend failed: {type(e).__name__}: {str(e)[:200]}")
            t_theirs, dt_t, y_t = None, float("nan"), None
        ops_o = Counter(read_tosa_ops(t_ours))
        ops_t = Counter(read_tosa_ops(t_theirs)) if t_theirs else Counter()
        rows.append((name, sqnr(ref, y_o), sqnr(ref, y_t) if y_t is not None else float("nan"),
                     dt_o / dt_t if dt_t == dt_t else float("nan"), ops_o, ops_t))
        print(f"\n== {name}: SQNR ours {rows[-1][1]:.1f} dB | theirs {rows[-1][2]:.1f} dB | "
              f"lowering time ours {dt_o:.2f}s theirs {dt_t:.2f}s ratio {rows[-1][3]:.2f}")
        print(f"   {'op':22s} {'ours':>6s} {'theirs':>7s}")
        for op in sorted(set(ops_o) | set(ops_t)):
            print(f"   {op:22s} {ops_o.get(op, 0):6d} {ops_t.get(op, 0):7d}")
        print(f"   {'TOTAL':22s} {sum(ops_o.values()):6d} {sum(ops_t.values()):7d}", flush=True)
    print("\nmodel               SQNR ours  SQNR theirs  time ours/theirs  ops ours/theirs")
    for name, so, st, r, oo, ot in rows:
        print(f"{name:18s} {so:9.1f} {st:12.1f} {r:17.2f} {sum(oo.values()):8d}/{sum(ot.values())}")


if __name__ == "__main__":
    main(sys.argv[1:] or [n for n in zoo.MODELS])
