"""Our lowering vs ExecuTorch's Arm backend (peer, comparison only) on the zoo.

For every zoo model, in the same run: INT8 TOSA SQNR vs the float model (ours / theirs) on
the model's example input and over 8 held-out inputs that calibration never saw (the digits
test split for digits_cnn, fresh normal noise for the others), lowering time ratio
ours/theirs, and TOSA op counts side by side.

    python benchmarks/bench_lowering.py [model ...]
"""

from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np
import torch
from _peer import executorch_tosa  # benchmarks/ is this script's directory

import lowering
from lowering import zoo
from lowering.serialize import read_tosa_ops


def sqnr(ref: torch.Tensor, out: torch.Tensor) -> float:
    ref, out = ref.double().flatten(), out.double().flatten()
    noise = (ref - out).pow(2).sum().item()
    return float("inf") if noise == 0 else 10 * np.log10(ref.pow(2).sum().item() / noise)


def held_out_inputs(name: str, example, n: int = 8) -> list[torch.Tensor]:
    """Inputs calibration never saw: the digits test split, or fresh noise shaped like the example."""
    if name == "digits_cnn":
        _, _, x_test, _ = zoo.digits_data()
        batch = example[0].shape[0]
        return [x_test[batch * (i + 1): batch * (i + 2)] for i in range(n)]
    gen = torch.Generator().manual_seed(123)
    return [torch.randn(example[0].shape, generator=gen) for _ in range(n)]


def ours(m, ex, cal):
    t = time.perf_counter()
    lm = lowering.lower(m, ex, profile="INT", calibration=cal)
    dt = time.perf_counter() - t
    return lm.tosa, dt, lambda x: lm.run(x)[0]


def theirs(m, ex, cal):
    """ExecuTorch Arm backend: TOSAQuantizer + TOSAPartitioner -> TOSA-1.0+INT flatbuffer."""
    peer = executorch_tosa(m, ex, "INT", calibration=cal)
    tosa, dt, c = peer.tosa, peer.seconds, peer.quantized
    # run their graph: find quantization of the delegate I/O from the converted graph
    import tosa_reference_model as trm

    ph = [n for n in c.graph.nodes if n.op == "placeholder"][0]
    qn = next(iter(ph.users))
    s, zp = float(qn.args[1]), int(qn.args[2])
    out_node = c.graph.output_node().args[0][0]
    o_s, o_zp = float(out_node.args[1]), int(out_node.args[2])
    out_shape = m(*ex).shape

    def run(x):
        xq = torch.ops.quantized_decomposed.quantize_per_tensor(x, s, zp, -128, 127, torch.int8)
        outs, status = trm.run(tosa, [xq.numpy()])
        if "VALID" not in str(status):
            raise RuntimeError(f"reference model: {status}")
        y = (torch.from_numpy(np.asarray(outs[0]).astype(np.float32)) - o_zp) * o_s
        return y.reshape(out_shape)

    return tosa, dt, run


def _sqnr_pair(m, run, ex, held_out) -> tuple[float, float]:
    """SQNR vs float on the example input, and over all held-out inputs together."""
    if run is None:
        return float("nan"), float("nan")
    with torch.no_grad():
        on_example = sqnr(m(*ex), run(ex[0]))
        ref = torch.cat([m(x) for x in held_out])
    return on_example, sqnr(ref, torch.cat([run(x) for x in held_out]))


def main(names):
    rows = []
    for name in names:
        m, ex, cal = zoo.MODELS[name]()
        held_out = held_out_inputs(name, ex)
        t_ours, dt_o, run_o = ours(m, ex, cal)
        try:
            t_theirs, dt_t, run_t = theirs(m, ex, cal)
        except Exception as e:  # noqa: BLE001
            print(f"[{name}] ExecuTorch Arm backend failed: {type(e).__name__}: {str(e)[:200]}")
            t_theirs, dt_t, run_t = None, float("nan"), None
        ops_o = Counter(read_tosa_ops(t_ours))
        ops_t = Counter(read_tosa_ops(t_theirs)) if t_theirs else Counter()
        (ex_o, held_o), (ex_t, held_t) = _sqnr_pair(m, run_o, ex, held_out), _sqnr_pair(m, run_t, ex, held_out)
        rows.append((name, ex_o, ex_t, held_o, held_t, dt_o / dt_t if dt_t == dt_t else float("nan"),
                     ops_o, ops_t))
        print(f"\n== {name}: SQNR (example) ours {ex_o:.1f} dB | theirs {ex_t:.1f} dB; "
              f"(held-out) ours {held_o:.1f} dB | theirs {held_t:.1f} dB | "
              f"lowering time ours {dt_o:.2f}s theirs {dt_t:.2f}s ratio {rows[-1][5]:.2f}")
        print(f"   {'op':22s} {'ours':>6s} {'theirs':>7s}")
        for op in sorted(set(ops_o) | set(ops_t)):
            print(f"   {op:22s} {ops_o.get(op, 0):6d} {ops_t.get(op, 0):7d}")
        print(f"   {'TOTAL':22s} {sum(ops_o.values()):6d} {sum(ops_t.values()):7d}", flush=True)
    print("\n                   SQNR dB, example   SQNR dB, held-out")
    print("model                ours  theirs      ours  theirs   time ours/theirs  ops ours/theirs")
    for name, eo, et, ho, ht, r, oo, ot in rows:
        print(f"{name:18s} {eo:6.1f} {et:7.1f}  {ho:8.1f} {ht:7.1f} {r:18.2f} {sum(oo.values()):8d}/{sum(ot.values())}")


if __name__ == "__main__":
    main(sys.argv[1:] or [n for n in zoo.MODELS])
