"""Dataset-scale evaluation: float vs fake-quant vs TOSA over a whole data set.

:func:`evaluate` takes a lowered model *as a value* (``lowering.LoweredModel`` or anything with
``.tosa``, ``.quantize_inputs``, ``.output_qparams``, ``.float_model``, ``.quantized_model``; this
module never imports ``lowering``) and a data set of float inputs stacked on axis 0, and reports

* top-1 agreement of the TOSA graph (and of the fake-quant model) with the float model, and top-5
  agreement: the float model's top-1 class is among the TOSA graph's five best;
* accuracy of all three against labels, when given;
* the confusion of the TOSA graph's top-1 against the float model's (``confusion[f, t]`` counts
  inputs the float model puts in class f and the TOSA graph in class t);
* the output SQNR (TOSA vs float, dB) of every input: median, 1st percentile, worst inputs;
* per-layer SQNR averaged over (an evenly spaced subset of) the set, from :func:`tosa_verify.drift`.

The TOSA graph runs with :func:`tosa_verify.run_batch` in shards of ``batch_size`` inputs, spread
over worker processes (``executor="local"``, BLAS limited to one thread per worker) or Ray tasks
(``executor="ray"``); shards are merged in order, so every executor gives the same bits as one
process. The first graph output is read as the classifier's scores, one row per input.

>>> import lowering, tosa_verify                                          # doctest: +SKIP
>>> lm = lowering.lower(model, (x[:1],), calibration=calib)               # doctest: +SKIP
>>> rep = tosa_verify.evaluate(lm, x_test, labels=y_test)                 # doctest: +SKIP
>>> rep.top1_agreement, rep.accuracy["tosa"]                              # doctest: +SKIP
(0.9933, 0.9711)
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .batch import run_batch
from .drift import drift
from .errors import TosaError, TosaInputError
from .graph import Graph, load

__all__ = ["EvalReport", "LayerSQNR", "Progress", "evaluate", "load_dataset", "run_sharded"]

#: Every metric :func:`evaluate` knows; ``metrics=`` picks a subset.
METRICS = ("top1", "top5", "accuracy", "confusion", "sqnr", "layers")


class EvalError(TosaError):
    """A data set or option that cannot be evaluated (one-line message naming the file or input)."""


@dataclass
class LayerSQNR:
    """One TOSA tensor's SQNR against float, over the inputs drift was run on."""

    tensor: str
    torch_node: str
    op: str
    mean_db: float
    min_db: float
    samples: int


@dataclass
class EvalReport:
    """What :func:`evaluate` measured. Agreements and accuracies are fractions in [0, 1]."""

    n: int
    profile: str
    classes: int
    top1_agreement: float | None = None
    top5_agreement: float | None = None
    fake_quant_top1_agreement: float | None = None
    accuracy: dict[str, float] = field(default_factory=dict)
    confusion: np.ndarray | None = None
    sqnr_db: np.ndarray | None = None
    fake_quant_sqnr_db: np.ndarray | None = None
    layers: list[LayerSQNR] = field(default_factory=list)
    layer_samples: list[int] = field(default_factory=list)
    predictions: dict[str, np.ndarray] = field(default_factory=dict)
    labels: np.ndarray | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    executor: str = "local"
    workers: int = 1
    batch_size: int = 32

    @property
    def sqnr_median(self) -> float | None:
        return _finite_stat(self.sqnr_db, np.median)

    @property
    def sqnr_p1(self) -> float | None:
        """1st percentile of the per-input output SQNR: the bad tail."""
        return _finite_stat(self.sqnr_db, lambda a: np.percentile(a, 1))

    def worst(self, k: int = 10) -> list[int]:
        """Indices of the ``k`` inputs with the lowest output SQNR (worst first; ties by index)."""
        if self.sqnr_db is None:
            return []
        return [int(i) for i in np.argsort(self.sqnr_db, kind="stable")[:k]]

    @property
    def tosa_inferences_per_second(self) -> float:
        t = self.seconds.get("tosa", 0.0)
        return self.n / t if t > 0 else float("inf")

    def to_dict(self, *, per_input: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``per_input`` adds the per-input SQNR and predictions."""
        out: dict[str, Any] = {
            "n": self.n, "profile": self.profile, "classes": self.classes,
            "top1_agreement": self.top1_agreement, "top5_agreement": self.top5_agreement,
            "fake_quant_top1_agreement": self.fake_quant_top1_agreement,
            "accuracy": self.accuracy,
            "sqnr_db": {"median": self.sqnr_median, "p1": self.sqnr_p1,
                        "worst": [{"index": i, "sqnr_db": _jf(self.sqnr_db[i]),
                                   **{k: int(v[i]) for k, v in self.predictions.items()},
                                   **({"label": int(self.labels[i])} if self.labels is not None else {})}
                                  for i in self.worst()]},
            "confusion": self.confusion.tolist() if self.confusion is not None else None,
            "layers": [{**vars(r), "mean_db": _jf(r.mean_db), "min_db": _jf(r.min_db)} for r in self.layers],
            "layer_samples": self.layer_samples,
            "seconds": self.seconds, "tosa_inferences_per_second": _jf(self.tosa_inferences_per_second),
            "executor": self.executor, "workers": self.workers, "batch_size": self.batch_size,
        }
        if per_input:
            out["per_input"] = {
                "sqnr_db": [_jf(v) for v in self.sqnr_db] if self.sqnr_db is not None else None,
                **{k: v.tolist() for k, v in self.predictions.items()},
            }
        return out

    def format_summary(self) -> str:
        """The terminal summary: agreements, accuracies, SQNR distribution, worst inputs, layers."""
        pct = lambda v: "-" if v is None else f"{100 * v:.2f} %"  # noqa: E731
        lines = [f"evaluated {self.n} inputs ({self.profile} TOSA, {self.classes} classes) in "
                 f"{sum(self.seconds.values()):.1f} s; TOSA {self.tosa_inferences_per_second:.1f} inferences/s "
                 f"({self.executor}, {self.workers} worker(s), batch {self.batch_size})"]
        if self.top1_agreement is not None:
            lines.append(f"top-1 agreement TOSA vs float:       {pct(self.top1_agreement)}")
        if self.top5_agreement is not None:
            lines.append(f"top-5 agreement (float top-1 in TOSA top-5): {pct(self.top5_agreement)}")
        if self.fake_quant_top1_agreement is not None:
            lines.append(f"top-1 agreement fake-quant vs float: {pct(self.fake_quant_top1_agreement)}")
        for k, v in self.accuracy.items():
            lines.append(f"accuracy {k:<11} {pct(v)}")
        if self.sqnr_db is not None:
            lines.append(f"output SQNR TOSA vs float: median {_db(self.sqnr_median)} dB, p1 {_db(self.sqnr_p1)} dB, "
                         f"worst {_db(float(np.min(self.sqnr_db)) if self.n else None)} dB")
            worst = ", ".join(f"#{i} {_db(self.sqnr_db[i])} dB" for i in self.worst(5))
            lines.append(f"worst inputs: {worst}")
        if self.confusion is not None:
            off = self.confusion.sum() - np.trace(self.confusion)
            pairs = np.argwhere(self.confusion - np.diag(np.diag(self.confusion)) > 0)
            top = sorted(((int(self.confusion[f, t]), int(f), int(t)) for f, t in pairs), reverse=True)[:5]
            lines.append(f"TOSA top-1 differs from float on {int(off)} inputs"
                         + (": " + ", ".join(f"float {f} -> TOSA {t} ({c}x)" for c, f, t in top) if top else ""))
        if self.layers:
            worst_layers = sorted(self.layers, key=lambda r: r.mean_db)[:5]
            lines.append(f"per-layer SQNR over {len(self.layer_samples)} inputs, lowest means: "
                         + ", ".join(f"{r.tensor} {_db(r.mean_db)} dB" for r in worst_layers))
        return "\n".join(lines)


def _jf(v: Any) -> Any:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else str(v)


def _db(v: float | None) -> str:
    if v is None:
        return "-"
    return "inf" if math.isinf(v) and v > 0 else f"{v:.1f}"


def _finite_stat(a: np.ndarray | None, fn: Callable[[np.ndarray], Any]) -> float | None:
    if a is None or a.size == 0:
        return None
    # +inf (a bit-exact output) is a value, not missing data: keep it in the order statistics
    return float(fn(np.where(np.isnan(a), -np.inf, a)))


# --------------------------------------------------------------------------- progress


class Progress:
    """A progress bar with rate and ETA on a stream (stderr by default); ``None`` stream: silent.

    >>> p = Progress(100, stream=None); p.update(50); p.done()
    """

    def __init__(self, total: int, label: str = "eval", stream: TextIO | None = sys.stderr) -> None:
        self.total, self.label, self.stream = total, label, stream
        self.start = time.perf_counter()
        self.count = 0
        self._last = 0.0
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def update(self, n: int) -> None:
        self.count += n
        now = time.perf_counter()
        # a terminal redraws in place; a log gets a line every few seconds
        if self.stream is None or (now - self._last < (0.2 if self._tty else 5.0) and self.count < self.total):
            return
        self._last = now
        self._write(now, end="\r" if self._tty and self.count < self.total else "\n")

    def _write(self, now: float, end: str) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.count / elapsed
        eta = (self.total - self.count) / rate if rate > 0 else float("inf")
        width = 30
        filled = int(width * self.count / max(self.total, 1))
        eta_s = f"ETA {eta:.0f} s" if math.isfinite(eta) else "ETA -"
        self.stream.write(f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} "
                          f"{rate:.1f} inputs/s {eta_s}{end}")
        self.stream.flush()

    def done(self) -> None:
        if self.stream is not None and self.count < self.total:
            self._write(time.perf_counter(), "\n")


# --------------------------------------------------------------------------- shards

_GRAPHS: dict[str, Graph] = {}
_PLANS: dict[str, dict] = {}


def _limit_threads() -> None:
    """One BLAS/OpenMP thread in a worker: the workers already fill the cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        import threadpoolctl

        threadpoolctl.threadpool_limits(1)
    except Exception:  # noqa: BLE001 - without threadpoolctl BLAS keeps its own threading
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def run_shard(tosa: bytes, key: str, arrays: list[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """One task: run stacked inputs through the graph (parsed once per process, by ``key``).

    >>> outs = run_shard(graph_bytes, "k", [xs], 32)   # doctest: +SKIP
    """
    if key not in _GRAPHS:
        _GRAPHS[key] = load(tosa)
        _PLANS[key] = {}
    return run_batch(_GRAPHS[key], arrays, batch_size=batch_size, plans=_PLANS[key])


def _worker_init() -> None:
    _limit_threads()


_POOLS: dict[int, Any] = {}


def _pool(workers: int) -> Any:
    """A process pool of ``workers``, kept for later calls: its workers keep their parsed graphs
    (by content hash), so repeated evaluations pay process start-up and graph parsing once."""
    pool = _POOLS.get(workers)
    if pool is None or getattr(pool, "_broken", False):
        import atexit
        import concurrent.futures as cf
        import multiprocessing

        # spawn, not fork: the parent has torch's and BLAS's thread pools running
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_worker_init)
        _POOLS[workers] = pool
        atexit.register(pool.shutdown, cancel_futures=True)
    return pool


def run_sharded(tosa: bytes, arrays: list[np.ndarray], *, batch_size: int = 32, workers: int = 1,
                executor: str = "local", ray_address: str | None = None,
                progress: Progress | None = None) -> list[np.ndarray]:
    """Stacked inputs through the graph in shards of ``batch_size``, on ``workers`` processes
    (``executor="local"``) or Ray tasks (``"ray"``), merged in shard order: the same bits as
    :func:`~tosa_verify.batch.run_batch` in one process.

    >>> [y] = run_sharded(open("model.tosa", "rb").read(), [xs], batch_size=8, workers=2)   # doctest: +SKIP
    """
    progress = progress or Progress(arrays[0].shape[0], stream=None)
    n = arrays[0].shape[0]
    key = hashlib.sha256(tosa).hexdigest()[:16]
    bounds = [(s, min(s + batch_size, n)) for s in range(0, n, batch_size)]
    shards = [[a[s:e] for a in arrays] for s, e in bounds]
    results: list[list[np.ndarray] | None] = [None] * len(shards)
    if executor == "ray":
        results = _run_ray(tosa, key, shards, batch_size, workers, ray_address, progress)
    elif workers <= 1 or len(shards) == 1:
        for i, shard in enumerate(shards):
            results[i] = run_shard(tosa, key, shard, batch_size)
            progress.update(shard[0].shape[0])
    else:
        import concurrent.futures as cf

        pool = _pool(workers)
        futures = {pool.submit(run_shard, tosa, key, shard, batch_size): i for i, shard in enumerate(shards)}
        for fut in cf.as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            progress.update(shards[i][0].shape[0])
    progress.done()
    return [np.concatenate(parts) for parts in zip(*results, strict=True)]


def _run_ray(tosa: bytes, key: str, shards: list[list[np.ndarray]], batch_size: int, workers: int,
             ray_address: str | None, progress: Progress) -> list[list[np.ndarray]]:
    try:
        import ray
    except ImportError:
        raise EvalError("--executor ray needs Ray: pip install 'tosa-verify[ray]'") from None
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": ray_address, "include_dashboard": False,
                                  "log_to_driver": False, "ignore_reinit_error": True}
        if ray_address is None:
            kwargs["num_cpus"] = workers
        # local workers import tosa_verify from where this process does
        kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                                              "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}}
        try:
            ray.init(**kwargs)
        except Exception as exc:  # noqa: BLE001 - connection errors come in many types
            raise EvalError(f"cannot start or reach Ray at {ray_address or 'a local instance'}: "
                            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    task = ray.remote(num_cpus=1)(_ray_shard)
    graph_ref = ray.put(tosa)
    futures = [task.remote(graph_ref, key, shard, batch_size) for shard in shards]
    index = {f: i for i, f in enumerate(futures)}
    results: list[list[np.ndarray] | None] = [None] * len(shards)
    pending = list(futures)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for f in done:
            i = index[f]
            results[i] = ray.get(f)
            progress.update(shards[i][0].shape[0])
    return results  # type: ignore[return-value]


def _ray_shard(tosa: bytes, key: str, arrays: list[np.ndarray], batch_size: int) -> list[np.ndarray]:
    _limit_threads()
    return run_shard(tosa, key, arrays, batch_size)


# --------------------------------------------------------------------------- data


def load_dataset(data: str | os.PathLike, labels: str | os.PathLike | None = None
                 ) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Read a data set: ``DATA.npz`` (array ``x``, or the first array; labels ``y`` if present) or
    a directory of ``.npy`` files, one input each, in file name order. ``labels`` (``.npy``, or
    text with one integer per line) overrides. Returns ([inputs stacked on axis 0], labels).

    >>> x, y = load_dataset("digits_test.npz")   # doctest: +SKIP
    """
    path = Path(data)
    y = None
    try:
        if path.is_dir():
            files = sorted(path.glob("*.npy"))
            if not files:
                raise EvalError(f"data directory {str(path)!r} holds no .npy files")
            x = np.stack([np.load(f, allow_pickle=False) for f in files])
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if not z.files:
                    raise EvalError(f"data file {str(path)!r} holds no arrays")
                x = z["x"] if "x" in z.files else z[z.files[0]]
                y = z["y"] if "y" in z.files else None
        elif path.suffix == ".npy":
            x = np.load(path, allow_pickle=False)
        else:
            raise EvalError(f"data {str(path)!r}: give a .npz file, a .npy file or a directory of .npy files")
        if labels is not None:
            lp = Path(labels)
            y = np.load(lp, allow_pickle=False) if lp.suffix == ".npy" else np.loadtxt(lp, dtype=np.int64, ndmin=1)
    except (OSError, ValueError) as exc:
        raise EvalError(f"cannot read data set {str(path)!r}: {' '.join(str(exc).split())}") from None
    if y is not None:
        y = np.asarray(y).reshape(-1).astype(np.int64)
        if y.shape[0] != x.shape[0]:
            raise EvalError(f"{y.shape[0]} labels for {x.shape[0]} inputs in {str(path)!r}")
    return [x], y


# --------------------------------------------------------------------------- evaluate


def _scores(out: np.ndarray, n: int) -> np.ndarray:
    return np.asarray(out, dtype=np.float64).reshape(n, -1)


def _torch_outputs(gm: Any, data: list[np.ndarray], batch_size: int) -> np.ndarray:
    import torch

    outs = []
    with torch.no_grad():
        for s in range(0, data[0].shape[0], batch_size):
            args = [torch.from_numpy(np.ascontiguousarray(a[s:s + batch_size])) for a in data]
            y = gm(*args)
            y = y[0] if isinstance(y, (tuple, list)) else y
            outs.append(y.detach().double().reshape(len(args[0]), -1).numpy())
    return np.concatenate(outs)


def _sqnr(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Per-row SQNR in dB (inf where equal, -inf... for a zero reference with an error)."""
    signal = np.sum(ref * ref, axis=1)
    noise = np.sum((ref - test) ** 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 10 * np.log10(signal / noise)
    out[noise == 0] = np.inf
    return out


def _top1_agreement(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a.argmax(1) == b.argmax(1)))


def evaluate(lowered: Any, dataset: np.ndarray | Sequence[np.ndarray], *, labels: np.ndarray | None = None,
             metrics: Sequence[str] = METRICS, batch_size: int = 32, workers: int | None = None,
             executor: str = "local", ray_address: str | None = None, layer_samples: int = 32,
             progress: TextIO | None = sys.stderr) -> EvalReport:
    """Evaluate a lowered model on a data set of float inputs (one array per model input, inputs
    stacked on axis 0, each row shaped as the model's batch-1 example input without its batch
    axis, or with it).

    ``metrics``: any of ``top1, top5, accuracy, confusion, sqnr, layers``. ``workers``: processes
    (default: every core); ``executor``: ``"local"`` or ``"ray"`` (``ray_address`` None starts a
    local instance). ``layer_samples``: per-layer SQNR over this many evenly spaced inputs (0: all).

    >>> rep = evaluate(lm, x_test, labels=y_test, metrics=("top1", "accuracy"))   # doctest: +SKIP
    >>> print(rep.format_summary())                                               # doctest: +SKIP
    """
    graph, data, labels = _checked(lowered, dataset, labels, metrics, executor, batch_size)
    tosa = lowered.tosa
    n = data[0].shape[0]
    workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
    seconds: dict[str, float] = {}

    # ---- TOSA inputs: quantize the whole set at once, then one row per input
    t = time.perf_counter()
    if len(graph.main.inputs) != len(data):
        raise EvalError(f"the TOSA graph takes {len(graph.main.inputs)} input(s), the data set has {len(data)}")
    import torch

    tosa_inputs = []
    for name, q in zip(graph.main.inputs, lowered.quantize_inputs(*[torch.from_numpy(a) for a in data]), strict=True):
        shape = graph.main.tensors[name].shape
        if q.size != n * int(np.prod(shape)):
            raise TosaInputError(f"data set inputs of shape {list(data[0].shape[1:])} do not fill the graph input "
                                 f"{name!r} {list(shape)}: lower the model with a batch-1 example input")
        tosa_inputs.append(q.reshape(n, *shape))
    seconds["quantize"] = time.perf_counter() - t

    # ---- TOSA
    t = time.perf_counter()
    bar = Progress(n, "eval TOSA", progress)
    raw = run_sharded(tosa, tosa_inputs, batch_size=batch_size, workers=workers, executor=executor,
                    ray_address=ray_address, progress=bar)[0]
    seconds["tosa"] = time.perf_counter() - t
    qps = getattr(lowered, "output_qparams", None) or [None]
    tosa_out = _scores(qps[0].dequantize(raw.astype(np.int64)) if qps[0] is not None else raw, n)

    # ---- float and fake-quant models (batched: float32 torch on one thread is fast)
    t = time.perf_counter()
    float_gm, fq_gm = getattr(lowered, "float_model", None), getattr(lowered, "quantized_model", None)
    float_out = _scores(_torch_outputs(float_gm, data, 256), n) if float_gm is not None else None
    fq_out = _scores(_torch_outputs(fq_gm, data, 256), n) if fq_gm is not None and \
        str(getattr(lowered, "profile", "INT")).upper() == "INT" else None
    seconds["torch"] = time.perf_counter() - t

    rep = EvalReport(n=n, profile=str(getattr(lowered, "profile", "INT")).upper(), classes=tosa_out.shape[1],
                     executor=executor, workers=workers, batch_size=batch_size, labels=labels)
    _prediction_metrics(rep, tosa_out, float_out, fq_out, labels, metrics)

    # ---- per-layer SQNR (drift) on evenly spaced inputs
    if "layers" in metrics and float_gm is not None:
        t = time.perf_counter()
        count = n if layer_samples <= 0 else min(layer_samples, n)
        rep.layer_samples = sorted({int(i) for i in np.linspace(0, n - 1, count).round()})
        rep.layers = _layer_sqnr(lowered, data, rep.layer_samples, progress)
        seconds["layers"] = time.perf_counter() - t
    rep.seconds = seconds
    return rep


def _checked(lowered: Any, dataset: np.ndarray | Sequence[np.ndarray], labels: np.ndarray | None,
             metrics: Sequence[str], executor: str,
             batch_size: int) -> tuple[Graph, list[np.ndarray], np.ndarray | None]:
    """:func:`evaluate`'s arguments checked (EvalError names what is wrong): the graph, the data
    as float32 arrays, the labels as int64."""
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise EvalError(f"unknown metric(s) {unknown}; choose from {', '.join(METRICS)}")
    if executor not in ("local", "ray"):
        raise EvalError(f"unknown executor {executor!r}: local or ray")
    if batch_size < 1:
        raise EvalError(f"batch size must be at least 1, got {batch_size}")
    tosa = getattr(lowered, "tosa", None)
    if tosa is None:
        raise EvalError("evaluate needs one TOSA graph; this model was split into partitions around CPU nodes")
    graph = load(tosa)
    data = [np.asarray(dataset, dtype=np.float32)] if isinstance(dataset, np.ndarray) else \
        [np.asarray(a, dtype=np.float32) for a in dataset]
    n = data[0].shape[0]
    if n == 0 or any(a.shape[0] != n for a in data):
        raise EvalError(f"the data set must hold the same number (> 0) of inputs for every model input, "
                        f"got {[a.shape[0] for a in data]}")
    if labels is not None:
        labels = np.asarray(labels).reshape(-1).astype(np.int64)
        if labels.shape[0] != n:
            raise EvalError(f"{labels.shape[0]} labels for {n} inputs")
    return graph, data, labels


def _prediction_metrics(rep: EvalReport, tosa_out: np.ndarray, float_out: np.ndarray | None,
                        fq_out: np.ndarray | None, labels: np.ndarray | None, metrics: Sequence[str]) -> None:
    """Predictions, agreement, confusion, output SQNR and accuracy into ``rep``."""
    rep.predictions["tosa"] = tosa_out.argmax(1)
    if float_out is not None:
        rep.predictions["float"] = float_out.argmax(1)
        if "top1" in metrics:
            rep.top1_agreement = _top1_agreement(tosa_out, float_out)
            if fq_out is not None:
                rep.fake_quant_top1_agreement = _top1_agreement(fq_out, float_out)
        if "top5" in metrics:
            k = min(5, tosa_out.shape[1])
            top = np.argsort(-tosa_out, axis=1, kind="stable")[:, :k]
            rep.top5_agreement = float(np.mean(np.any(top == rep.predictions["float"][:, None], axis=1)))
        if "confusion" in metrics:
            c = tosa_out.shape[1]
            rep.confusion = np.zeros((c, c), dtype=np.int64)
            np.add.at(rep.confusion, (rep.predictions["float"], rep.predictions["tosa"]), 1)
        if "sqnr" in metrics:
            rep.sqnr_db = _sqnr(float_out, tosa_out)
            if fq_out is not None:
                rep.fake_quant_sqnr_db = _sqnr(float_out, fq_out)
    if fq_out is not None:
        rep.predictions["fake_quant"] = fq_out.argmax(1)
    if labels is not None and "accuracy" in metrics:
        for k in ("float", "fake_quant", "tosa"):
            if k in rep.predictions:
                rep.accuracy[k] = float(np.mean(rep.predictions[k] == labels))


def _layer_sqnr(lowered: Any, data: list[np.ndarray], indices: list[int], stream: TextIO | None) -> list[LayerSQNR]:
    import torch

    values: dict[str, list[float]] = {}
    meta: dict[str, tuple[str, str]] = {}
    bar = Progress(len(indices), "eval layers", stream)
    for i in indices:
        report = drift(lowered, [torch.from_numpy(a[i:i + 1]) for a in data],
                       reference=False, local=False, rounding=False)
        for row in report.primary_rows:
            if row.total is not None:
                values.setdefault(row.tensor, []).append(row.total.sqnr_db)
                meta.setdefault(row.tensor, (row.torch_node, row.op))
        bar.update(1)
    bar.done()
    rows = []
    for name, vals in values.items():
        arr = np.asarray(vals, dtype=np.float64)
        finite = arr[np.isfinite(arr)]
        # an exact layer (inf dB) on every input stays inf; otherwise the mean of the finite values
        mean = float(finite.mean()) if finite.size else float(arr.max())
        rows.append(LayerSQNR(name, meta[name][0], meta[name][1], mean, float(arr.min()), len(vals)))
    return rows


# --------------------------------------------------------------------------- HTML
