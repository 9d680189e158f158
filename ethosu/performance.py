"""Vela's performance estimates as dataclasses, read from the files Vela writes.

* ``<network>_summary_<system_config>.csv``: one row of network totals -> :class:`Performance`
  (with one :class:`MemoryAreaStats` per memory area Vela reports);
* ``<network>_per-layer.csv`` (written with ``--verbose-performance``): one row per NPU
  operation -> :class:`LayerPerformance`;
* ``<network>_debug.xml`` (written with ``--enable-debug-db``): Vela's optimiser database,
  whose tables map each operation back to the TOSA operator it came from.

Units are Vela's: cycles at the NPU core clock, memory used in KiB, bandwidth in Vela's GB/s
(bytes per second / 2**30), inference time in seconds.
"""

from __future__ import annotations

import csv
import io
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

#: Vela's memory-area identifiers as they prefix summary-CSV columns.
OFF_CHIP_AREAS = ("dram", "off_chip_flash")


def _int(text: str | None) -> int:
    if text is None or str(text).strip() in ("", "nan", "NaN"):
        return 0
    try:
        return int(text)
    except ValueError:
        return int(float(text))


def _float(text: str | None) -> float:
    if text is None or str(text).strip() == "":
        return math.nan
    return float(text)


@dataclass(frozen=True)
class MemoryAreaStats:
    """One memory area of the summary CSV (``sram``, ``dram``, ``on_chip_flash``, ...).

    Example:
        >>> sram = parse_summary_csv(SAMPLE_SUMMARY_CSV).area("sram")
        >>> sram.total_bytes, sram.off_chip
        (20708, False)
    """

    name: str
    peak_bandwidth_gb_s: float
    used_kib: float
    feature_map_read_bytes: int
    feature_map_write_bytes: int
    weight_read_bytes: int
    weight_write_bytes: int
    total_bytes: int
    access_cycles: int

    @property
    def off_chip(self) -> bool:
        """True for DRAM and off-chip flash."""
        return self.name in OFF_CHIP_AREAS


@dataclass(frozen=True)
class Performance:
    """Vela's network summary (one row of the summary CSV).

    ``raw`` keeps every column exactly as Vela wrote it.

    Example:
        >>> perf = parse_summary_csv(SAMPLE_SUMMARY_CSV)
        >>> perf.total_cycles, perf.sram_used_kib
        (6532, 5.140625)
    """

    network: str
    accelerator: str
    system_config: str
    memory_mode: str
    core_clock_hz: float
    arena_cache_size_kib: float
    weights_storage_area: str
    feature_map_storage_area: str
    inferences_per_second: float
    batch_size: int
    inference_time_s: float
    passes_before_fusing: int
    passes_after_fusing: int
    total_original_weights_bytes: int
    total_npu_encoded_weights_bytes: int
    macs: int
    tops: float
    npu_cycles: int
    total_cycles: int
    memory_areas: tuple[MemoryAreaStats, ...]
    raw: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def area(self, name: str) -> MemoryAreaStats:
        """The stats of one memory area by Vela identifier (``"sram"``, ``"dram"``, ...)."""
        for stats in self.memory_areas:
            if stats.name == name:
                return stats
        raise KeyError(name)

    @property
    def inference_time_ms(self) -> float:
        """Inference time in milliseconds at the configured core clock."""
        return self.inference_time_s * 1e3

    @property
    def sram_used_kib(self) -> float:
        """Peak SRAM use in KiB."""
        return sum(a.used_kib for a in self.memory_areas if a.name == "sram")

    @property
    def off_chip_used_kib(self) -> float:
        """Peak use of off-chip memories (DRAM and off-chip flash) in KiB."""
        return sum(a.used_kib for a in self.memory_areas if a.off_chip)

    def average_bandwidth_gb_s(self, name: str) -> float:
        """Average bandwidth of one area over an inference, in Vela's GB/s (2**30 B/s)."""
        if self.inference_time_s <= 0:
            return 0.0
        return self.area(name).total_bytes / self.inference_time_s / 2**30

    def to_dict(self) -> dict:
        """A JSON-ready dict (memory areas keyed by name, raw CSV row under ``"raw"``)."""
        data = asdict(self)
        data["memory_areas"] = {a.name: asdict(a) for a in self.memory_areas}
        data["raw"] = dict(self.raw)
        data["sram_used_kib"] = self.sram_used_kib
        data["off_chip_used_kib"] = self.off_chip_used_kib
        data["inference_time_ms"] = self.inference_time_ms
        return data


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def parse_summary_csv(text: str) -> Performance:
    """Parse the text of Vela's ``*_summary_*.csv`` into :class:`Performance`.

    Memory areas are discovered from the ``<area>_memory_used`` columns, so areas Vela may
    add later are picked up too.

    Example:
        >>> parse_summary_csv(SAMPLE_SUMMARY_CSV).area("off_chip_flash").used_kib
        2.21875
    """
    rows = _csv_rows(text)
    if len(rows) != 1:
        raise ValueError(f"expected one data row in Vela's summary CSV, found {len(rows)}")
    row = rows[0]
    areas = [col[: -len("_memory_used")] for col in row if col.endswith("_memory_used")]
    memory_areas = tuple(
        MemoryAreaStats(
            name=area,
            peak_bandwidth_gb_s=_float(row.get(f"{area}_bandwidth")),
            used_kib=_float(row.get(f"{area}_memory_used")),
            feature_map_read_bytes=_int(row.get(f"{area}_feature_map_read_bytes")),
            feature_map_write_bytes=_int(row.get(f"{area}_feature_map_write_bytes")),
            weight_read_bytes=_int(row.get(f"{area}_weight_read_bytes")),
            weight_write_bytes=_int(row.get(f"{area}_weight_write_bytes")),
            total_bytes=_int(row.get(f"{area}_total_bytes")),
            access_cycles=_int(row.get(f"cycles_{area}_access")),
        )
        for area in areas
    )
    return Performance(
        network=row.get("network", ""),
        accelerator=row.get("accelerator_configuration", ""),
        system_config=row.get("system_config", ""),
        memory_mode=row.get("memory_mode", ""),
        core_clock_hz=_float(row.get("core_clock")),
        arena_cache_size_kib=_float(row.get("arena_cache_size")),
        weights_storage_area=row.get("weights_storage_area", ""),
        feature_map_storage_area=row.get("feature_map_storage_area", ""),
        inferences_per_second=_float(row.get("inferences_per_second")),
        batch_size=_int(row.get("batch_size")),
        inference_time_s=_float(row.get("inference_time")),
        passes_before_fusing=_int(row.get("passes_before_fusing")),
        passes_after_fusing=_int(row.get("passes_after_fusing")),
        total_original_weights_bytes=_int(row.get("total_original_weights")),
        total_npu_encoded_weights_bytes=_int(row.get("total_npu_encoded_weights")),
        macs=_int(row.get("nn_macs")),
        tops=_float(row.get("nn_tops")),
        npu_cycles=_int(row.get("cycles_npu")),
        total_cycles=_int(row.get("cycles_total")),
        memory_areas=memory_areas,
        raw=dict(row),
    )


@dataclass(frozen=True)
class LayerPerformance:
    """One row of Vela's per-layer CSV, plus where it came from in the TOSA graph.

    ``tosa_op_index``/``tosa_op`` (the TOSA operator of the main block that Vela's debug
    database names as this layer's source) and ``ifm_memory``/``ofm_memory`` are filled in
    when the debug database is available; otherwise they are ``None``/``""``.

    Example:
        >>> layer = parse_per_layer_csv(SAMPLE_PER_LAYER_CSV)[0]
        >>> layer.original_operator, layer.cycles, layer.macs
        ('Conv2D', 3136, 55296)
    """

    original_operator: str
    nng_operator: str
    target: str
    staging_usage_bytes: int
    peak_staging_pct: float
    cycles: int
    network_cycles_pct: float
    npu_cycles: int
    sram_access_cycles: int
    dram_access_cycles: int
    on_chip_flash_access_cycles: int
    off_chip_flash_access_cycles: int
    macs: int
    network_macs_pct: float
    mac_utilisation_pct: float
    name: str
    tosa_op_index: int | None = None
    tosa_op: str = ""
    ifm_memory: str = ""
    ofm_memory: str = ""

    @property
    def memory_area(self) -> str:
        """The memory the layer writes its output feature map to.

        ``""`` when unknown or when the output never reaches memory: on Ethos-U85 Vela chains
        an elementwise operation into its producer; such a layer shows 0 cycles (they are
        counted in the producer's row) and no OFM memory.
        """
        return self.ofm_memory

    @property
    def access_cycles(self) -> dict[str, int]:
        """Access cycles per memory area, as in the summary CSV's area names."""
        return {
            "sram": self.sram_access_cycles,
            "dram": self.dram_access_cycles,
            "on_chip_flash": self.on_chip_flash_access_cycles,
            "off_chip_flash": self.off_chip_flash_access_cycles,
        }

    def to_dict(self) -> dict:
        """A JSON-ready dict of the fields (plus ``memory_area``)."""
        data = asdict(self)
        data["memory_area"] = self.memory_area
        return data


#: per-layer CSV column -> (LayerPerformance field, converter)
_LAYER_COLUMNS = {
    "Original Operator": ("original_operator", str),
    "NNG Operator": ("nng_operator", str),
    "Target": ("target", str),
    "Staging Usage": ("staging_usage_bytes", _int),
    "Peak% (Staging)": ("peak_staging_pct", _float),
    "Op Cycles": ("cycles", _int),
    "Network% (cycles)": ("network_cycles_pct", _float),
    "NPU": ("npu_cycles", _int),
    "SRAM AC": ("sram_access_cycles", _int),
    "DRAM AC": ("dram_access_cycles", _int),
    "OnFlash AC": ("on_chip_flash_access_cycles", _int),
    "OffFlash AC": ("off_chip_flash_access_cycles", _int),
    "MAC Count": ("macs", _int),
    "Network% (MAC)": ("network_macs_pct", _float),
    "Util% (MAC)": ("mac_utilisation_pct", _float),
    "Name": ("name", str),
}


def parse_per_layer_csv(text: str) -> list[LayerPerformance]:
    """Parse the text of Vela's ``*_per-layer.csv`` into :class:`LayerPerformance` rows.

    Vela writes this file by joining fields with commas without quoting; ``Name`` (a tensor
    name) is the last column, so surplus fields of a row are joined back into it.

    Example:
        >>> [layer.cycles for layer in parse_per_layer_csv(SAMPLE_PER_LAYER_CSV)]
        [3136, 1728]
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        return []
    missing = [col for col in _LAYER_COLUMNS if col not in header]
    if missing:
        raise ValueError(f"Vela's per-layer CSV lacks columns {missing}")
    layers = []
    for fields in reader:
        if not fields:
            continue
        if len(fields) > len(header):
            last = len(header) - 1
            fields = fields[:last] + [",".join(fields[last:])]
        values = dict(zip(header, fields, strict=False))
        kwargs = {name: conv(values.get(col, "")) for col, (name, conv) in _LAYER_COLUMNS.items()}
        layers.append(LayerPerformance(**kwargs))
    return layers


def parse_debug_database(text: str) -> dict[str, list[dict[str, str]]]:
    """Parse Vela's ``*_debug.xml`` (its optimiser database) into ``{table: rows}``.

    Example:
        >>> db = parse_debug_database(SAMPLE_DEBUG_XML)
        >>> db["source"][0]["operator"], db["source"][0]["ext_key"]
        ('Conv2D', '10')
    """
    root = ET.fromstring(text)
    tables: dict[str, list[dict[str, str]]] = {}
    for table in root.iter("table"):
        body = (table.text or "").strip("\n")
        tables[table.get("name", "")] = _csv_rows(body)
    return tables


def attach_sources(
    layers: Sequence[LayerPerformance],
    database: Mapping[str, list[dict[str, str]]],
    tosa_ops: Sequence[str] | None = None,
) -> list[LayerPerformance]:
    """Fill in each layer's TOSA operator and IFM/OFM memory from Vela's debug database.

    Vela derives both the per-layer CSV and the database's ``perf`` table from the same
    rows in the same order; layers are matched to ``perf`` rows by position and checked by
    name. ``source.ext_key`` is the index of the TOSA operator in the main block;
    ``tosa_ops`` (operator names in graph order) turns it into a TOSA op name, otherwise
    Vela's own name for the source operator is used.

    Example:
        >>> layers = parse_per_layer_csv(SAMPLE_PER_LAYER_CSV)
        >>> db = parse_debug_database(SAMPLE_DEBUG_XML)
        >>> attach_sources(layers, db, ["CONST"] * 10 + ["CONV2D"])[0].tosa_op
        'CONV2D'
    """
    perf = database.get("perf", [])
    if len(perf) != len(layers):
        return list(layers)
    sources = {row.get("id"): row for row in database.get("source", [])}
    memories = {row.get("id"): row for row in database.get("perf_debug", [])}
    result = []
    for layer, row in zip(layers, perf, strict=True):
        if row.get("name", layer.name) != layer.name:
            return list(layers)
        source = sources.get(row.get("source_id"), {})
        index = _int(source["ext_key"]) if source.get("ext_key", "") != "" else None
        if index is not None and tosa_ops is not None and 0 <= index < len(tosa_ops):
            op_name = tosa_ops[index]
        else:
            op_name = source.get("operator", "")
        mem = memories.get(row.get("id"), {})
        result.append(
            replace(
                layer,
                tosa_op_index=index,
                tosa_op=op_name,
                ifm_memory=mem.get("ifm_memory", ""),
                ofm_memory=mem.get("ofm_memory", ""),
            )
        )
    return result


# Small excerpts of real Vela 5.2.0 output, used by the docstring examples.
SAMPLE_SUMMARY_CSV = (
    "experiment,network,accelerator_configuration,system_config,memory_mode,core_clock,"
    "arena_cache_size,sram_bandwidth,off_chip_flash_bandwidth,weights_storage_area,"
    "feature_map_storage_area,inferences_per_second,batch_size,inference_time,"
    "passes_before_fusing,passes_after_fusing,sram_memory_used,off_chip_flash_memory_used,"
    "total_original_weights,total_npu_encoded_weights,sram_feature_map_read_bytes,"
    "sram_feature_map_write_bytes,sram_weight_read_bytes,sram_weight_write_bytes,"
    "sram_total_bytes,off_chip_flash_feature_map_read_bytes,"
    "off_chip_flash_feature_map_write_bytes,off_chip_flash_weight_read_bytes,"
    "off_chip_flash_weight_write_bytes,off_chip_flash_total_bytes,nn_macs,nn_tops,cycles_npu,"
    "cycles_sram_access,cycles_off_chip_flash_access,cycles_total\n"
    "default,net,Ethos_U55_128,Ethos_U55_High_End_Embedded,Shared_Sram,500000000.0,"
    "4194304.0,3.725290298461914,0.46566128730773926,Off-chip Flash,SRAM,76546.23392529087,1,"
    "1.3064e-05,6,6,5.140625,2.21875,1536,1920,12048,7460,640,400,20708,0,0,2000,0,2272,"
    "130208,0.019933864053888545,6209,2518,2032,6532\n"
)
SAMPLE_PER_LAYER_CSV = (
    "Original Operator,NNG Operator,Target,Staging Usage,Peak% (Staging),Op Cycles,"
    "Network% (cycles),NPU,SRAM AC,DRAM AC,OnFlash AC,OffFlash AC,MAC Count,Network% (MAC),"
    "Util% (MAC),Name\n"
    "Conv2D,Conv2D,NPU,5264,100.0,3136,48.0,3136,1264,0,0,160,55296,42.4,13.7,tosa_rescale_default\n"
    "Conv2D,Conv2D,NPU,5120,97.2,1728,26.4,1728,640,0,0,1520,73728,56.6,33.3,t,1\n"
)
SAMPLE_DEBUG_XML = (
    "<debug source='net'>"
    '<table name="perf"><![CDATA[\n"id","source_id","name"\n'
    '118,11,"tosa_rescale_default"\n124,19,"t,1"\n]]></table>'
    '<table name="source"><![CDATA[\n"id","operator","ext_key"\n11,"Conv2D",10\n]]></table>'
    '<table name="perf_debug"><![CDATA[\n"id","ifm_memory","ofm_memory"\n118,"Sram","Sram"\n]]>'
    "</table></debug>"
)
