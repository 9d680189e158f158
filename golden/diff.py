"""Compare goldens and classify what changed.

Each case gets findings, and its status is the worst of them:

=======================  ==============================================================
status                   meaning
=======================  ==============================================================
identical                outputs, per-tensor statistics and performance are equal
within-tolerance         float outputs moved, inside the tolerance
performance-regression   Vela cycles went up by more than ``max_cycles_increase``
quantization-drift       a layer's SQNR vs float fell by more than ``max_sqnr_drop_db``
numerical-regression     an integer output changed, or a float output left the tolerance
config-changed           the goldens were recorded with different profiles or quantization
                         configs: the numbers are not comparable, so none are compared; the
                         finding names what changed (re-record the golden to accept it)
=======================  ==============================================================

Tool-version changes are reported beside the status; they explain, they do not fail.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .store import Golden, GoldenMissingError, GoldenStore

SEVERITY = ["identical", "within-tolerance", "performance-regression", "quantization-drift", "numerical-regression",
            "config-changed"]
FAILING = {"performance-regression", "quantization-drift", "numerical-regression", "config-changed"}


@dataclass(frozen=True)
class Thresholds:
    """Gates of the classification."""

    max_sqnr_drop_db: float = 1.0
    max_cycles_increase: float = 0.05  # fraction: 0.05 = +5 %
    float_atol: float = 1e-3
    float_rtol: float = 1e-3

    @classmethod
    def from_options(cls, max_sqnr_drop_db: float | None = None,
                     max_cycles_increase_pct: float | None = None) -> Thresholds:
        """The thresholds from command-line options (a cycle increase in percent); an option
        left as None keeps its default. The one place the CLI, ``check`` and the pytest
        fixture build thresholds.

        >>> Thresholds.from_options(max_cycles_increase_pct=10).max_cycles_increase
        0.1
        >>> Thresholds.from_options() == Thresholds()
        True
        """
        default = cls()
        return cls(max_sqnr_drop_db=default.max_sqnr_drop_db if max_sqnr_drop_db is None else max_sqnr_drop_db,
                   max_cycles_increase=default.max_cycles_increase if max_cycles_increase_pct is None
                   else max_cycles_increase_pct / 100.0)


@dataclass
class Finding:
    """One observed change in a case."""

    kind: str
    message: str
    tensor: str = ""
    torch_node: str = ""
    module_path: str = ""


@dataclass
class CaseDiff:
    """The comparison of one case: status, findings, tool-version changes."""

    case: str
    findings: list[Finding] = field(default_factory=list)
    version_changes: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def status(self) -> str:
        worst = 0
        for f in self.findings:
            worst = max(worst, SEVERITY.index(f.kind))
        return SEVERITY[worst]

    @property
    def failed(self) -> bool:
        return self.status in FAILING


@dataclass
class GoldenDiffReport:
    """Per-case diffs plus cases only in one side."""

    cases: list[CaseDiff]
    missing_in_new: list[str] = field(default_factory=list)
    new_cases: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.failed for c in self.cases) or bool(self.missing_in_new)

    def format(self) -> str:
        """A readable report, one block per case, worst first."""
        lines = []
        order = sorted(self.cases, key=lambda c: -SEVERITY.index(c.status))
        for c in order:
            lines.append(f"{c.case}: {c.status.upper() if c.failed else c.status}")
            for f in c.findings:
                lines.append(f"  - {f.kind}: {f.message}{_where(f)}")
            for tool, (a, b) in c.version_changes.items():
                lines.append(f"  - tool version changed: {tool} {a} -> {b}")
        for case in self.missing_in_new:
            lines.append(f"{case}: MISSING in the new run")
        for case in self.new_cases:
            lines.append(f"{case}: new (no golden yet)")
        return "\n".join(lines) if lines else "no cases"

    def to_json(self) -> str:
        """Machine-readable report."""
        return json.dumps(
            {
                "failed": self.failed,
                "cases": [dict(asdict(c), status=c.status) for c in self.cases],
                "missing_in_new": self.missing_in_new,
                "new_cases": self.new_cases,
            },
            indent=1,
            default=str,
        )


def diff(old: Golden | GoldenStore | str | Path, new: Golden | GoldenStore | str | Path,
         thresholds: Thresholds | None = None, *, case: str = "case") -> GoldenDiffReport:
    """Compare two goldens (or two stores, case by case) and classify every change.

    >>> report = diff(GoldenStore("goldens/main"), GoldenStore("goldens/pr"))   # doctest: +SKIP
    >>> print(report.format())                                                   # doctest: +SKIP
    digits_cnn/INT: NUMERICAL-REGRESSION
      - numerical-regression: output 'output' changed in 3 of 10 elements (max 1 step) ...
    """
    thresholds = thresholds or Thresholds()
    if isinstance(old, Golden) and isinstance(new, Golden):
        return GoldenDiffReport([diff_case(case, old, new, thresholds)])
    old_store = old if isinstance(old, GoldenStore) else GoldenStore(old)
    new_store = new if isinstance(new, GoldenStore) else GoldenStore(new)
    for store in (old_store, new_store):
        if not store.root.is_dir():
            raise GoldenMissingError(f"golden directory {str(store.root)!r} does not exist")
    old_cases, new_cases = set(old_store.cases()), set(new_store.cases())
    if not old_cases and not new_cases:
        raise GoldenMissingError(f"no goldens in {str(old_store.root)!r} or {str(new_store.root)!r}: nothing to compare")
    diffs = [diff_case(c, old_store.read(c), new_store.read(c), thresholds) for c in sorted(old_cases & new_cases)]
    return GoldenDiffReport(diffs, sorted(old_cases - new_cases), sorted(new_cases - old_cases))


def diff_case(case: str, old: Golden, new: Golden, thresholds: Thresholds) -> CaseDiff:
    """Classify the changes between two goldens of the same case."""
    result = CaseDiff(case)
    for tool in sorted(set(old.versions) | set(new.versions)):
        a, b = old.versions.get(tool, "-"), new.versions.get(tool, "-")
        if a != b:
            result.version_changes[tool] = (a, b)
    changed = config_changes(old, new)
    if changed:
        result.findings.append(Finding(
            "config-changed", "recorded with another config: " + "; ".join(changed)
            + " (outputs not compared; re-record the golden to accept the new config)"))
        return result
    first_changed = _first_changed_tensor(old, new)
    for name in sorted(set(old.outputs) | set(new.outputs)):
        if name not in old.outputs or name not in new.outputs:
            result.findings.append(Finding("numerical-regression", f"output {name} exists on one side only"))
            continue
        result.findings.extend(
            _compare_output(name, old.outputs[name], new.outputs[name], thresholds, first_changed, new))
    result.findings.extend(_compare_sqnr(old, new, thresholds))
    result.findings.extend(_compare_performance(old, new, thresholds))
    for key in ("model_hash", "input_seed"):
        if old.manifest.get(key) != new.manifest.get(key):
            changes = "; ".join(_changes(old.manifest.get(key), new.manifest.get(key)))
            result.findings.append(Finding("within-tolerance", f"{key.replace('_', ' ')} changed: {changes}"))
    if not result.findings and old.stats.keys() != new.stats.keys():
        result.findings.append(Finding("within-tolerance", "the set of recorded tensors changed"))
    return result


def _config(golden: Golden) -> dict[str, object]:
    """What a golden is keyed by besides its case: profile and quantization config."""
    quantization = golden.manifest.get("quantization") or {}
    key: dict[str, object] = {"profile": golden.manifest.get("profile") or quantization.get("profile", "")}
    config = quantization.get("config", "default")
    if isinstance(config, dict):
        key.update(config)
    else:
        key["config"] = config
    return key


def config_changes(old: Golden, new: Golden) -> list[str]:
    """``"field: old -> new"`` for each profile / quantization config field that differs.

    >>> a = Golden(manifest={"profile": "INT", "quantization": {"config": {"activation_dtype": "torch.int8"}}})
    >>> b = Golden(manifest={"profile": "INT", "quantization": {"config": {"activation_dtype": "torch.int16"}}})
    >>> config_changes(a, b)
    ['activation_dtype: torch.int8 -> torch.int16']
    """
    a, b = _config(old), _config(new)
    return [f"{k}: {a.get(k, '-')} -> {b.get(k, '-')}" for k in sorted(set(a) | set(b), key=str)
            if a.get(k, "-") != b.get(k, "-")]


def _where(f: Finding) -> str:
    """`` [conv2d_1 in features.3.conv]``: the torch node (when it is not the tensor's own name)
    and module of a finding's tensor."""
    if not f.tensor:
        return ""
    parts = [f"torch node {f.torch_node}"] if f.torch_node and f.torch_node != f.tensor else []
    if f.module_path:
        parts.append(f"module {f.module_path}")
    return f" ({', '.join(parts)})" if parts else ""


def _value(v: object) -> str:
    if isinstance(v, str) and len(v) > 24 and all(c in "0123456789abcdef:sha" for c in v):
        return v[-12:]  # a digest: its tail tells two apart
    return "-" if v is None else str(v)


def _changes(a: object, b: object, prefix: str = "") -> list[str]:
    """Readable differences of two manifest values: ``config.activation_observer histogram ->
    minmax`` per changed leaf, never a whole dict.

    >>> _changes({"config": {"obs": "minmax", "per_channel": True}}, {"config": {"obs": "histogram", "per_channel": True}})
    ['config.obs minmax -> histogram']
    >>> _changes(0, 3, "seed")
    ['seed 0 -> 3']
    """
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                out.extend(_changes(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k)))
        return out
    return [f"{prefix + ' ' if prefix else ''}{_value(a)} -> {_value(b)}"]


def _first_changed_text(first_changed: str, new: Golden) -> str:
    if not first_changed:
        return ""
    if first_changed in new.inputs:
        return f"; first changed tensor: the graph input {first_changed} (its quantization)"
    return f"; first changed layer: {first_changed}"


def _locate(golden: Golden, tensor: str) -> dict[str, str]:
    """Finding fields naming ``tensor`` and, through its statistics, its torch node and module."""
    s = golden.stats.get(tensor)
    return {"tensor": tensor, "torch_node": s.torch_node if s else "", "module_path": s.module_path if s else ""}


def _first_changed_tensor(old: Golden, new: Golden) -> str:
    """The first tensor, in recorded (topological) order, whose statistics differ."""
    order = new.manifest.get("tensor_order") or list(new.stats)
    for name in order:
        a, b = old.stats.get(name), new.stats.get(name)
        if a is None or b is None:
            continue
        if (a.min, a.max, a.mean, a.std, a.histogram) != (b.min, b.max, b.mean, b.std, b.histogram):
            return name
    return ""


def _compare_output(name: str, a: np.ndarray, b: np.ndarray, t: Thresholds, first_changed: str,
                    new: Golden) -> list[Finding]:
    if a.shape != b.shape or a.dtype != b.dtype:
        return [Finding("numerical-regression", f"output {name} changed from {a.dtype}{list(a.shape)} to {b.dtype}{list(b.shape)}")]
    if a.dtype.kind in "biuV":
        av, bv = a.view(np.uint8) if a.dtype.kind == "V" else a, b.view(np.uint8) if b.dtype.kind == "V" else b
        changed = av != bv
        if not changed.any():
            return []
        steps = int(np.max(np.abs(av.astype(np.int64) - bv.astype(np.int64)))) if av.dtype.kind in "iu" else 0
        msg = f"integer output {name} changed in {int(changed.sum())} of {a.size} elements (max {steps} steps)"
        msg += _first_changed_text(first_changed, new)
        return [Finding("numerical-regression", msg, **_locate(new, first_changed))]
    af, bf = a.astype(np.float64), b.astype(np.float64)
    if np.array_equal(af, bf, equal_nan=True):
        return []
    close = np.isclose(bf, af, atol=t.float_atol, rtol=t.float_rtol, equal_nan=True)
    worst = float(np.nanmax(np.abs(af - bf)))
    if close.all():
        return [Finding("within-tolerance", f"float output {name} moved by at most {worst:.3g}")]
    msg = f"float output {name} outside atol {t.float_atol}/rtol {t.float_rtol} in {int((~close).sum())} elements (max abs {worst:.3g})"
    msg += _first_changed_text(first_changed, new)
    return [Finding("numerical-regression", msg, **_locate(new, first_changed))]


def _compare_sqnr(old: Golden, new: Golden, t: Thresholds) -> list[Finding]:
    order = new.manifest.get("tensor_order") or list(new.stats)
    for name in order:
        a, b = old.stats.get(name), new.stats.get(name)
        if a is None or b is None or a.sqnr_db is None or b.sqnr_db is None:
            continue
        if math.isinf(a.sqnr_db) and math.isinf(b.sqnr_db):
            continue
        drop = a.sqnr_db - b.sqnr_db
        if drop > t.max_sqnr_drop_db:
            return [Finding(
                "quantization-drift",
                f"SQNR vs float fell {drop:.2f} dB ({a.sqnr_db:.2f} -> {b.sqnr_db:.2f} dB), first such layer",
                name, b.torch_node, b.module_path,
            )]
    return []


def _compare_performance(old: Golden, new: Golden, t: Thresholds) -> list[Finding]:
    findings = []
    for target, before in old.performance.items():
        after = new.performance.get(target)
        if not after or not before.get("cycles"):
            continue
        increase = (after["cycles"] - before["cycles"]) / before["cycles"]
        if increase > t.max_cycles_increase:
            findings.append(Finding(
                "performance-regression",
                f"{target}: cycles {before['cycles']} -> {after['cycles']} (+{100 * increase:.1f} %, gate {100 * t.max_cycles_increase:.1f} %)",
            ))
    return findings
