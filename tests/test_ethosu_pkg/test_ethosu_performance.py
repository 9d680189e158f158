"""Parsing Vela's CSV/XML outputs, and the docstring examples of the ethosu modules."""

from __future__ import annotations

import doctest
import importlib
import math

import pytest

from ethosu.performance import (
    SAMPLE_PER_LAYER_CSV,
    SAMPLE_SUMMARY_CSV,
    parse_per_layer_csv,
    parse_summary_csv,
)


@pytest.mark.parametrize(
    "module",
    ["ethosu.errors", "ethosu._capture", "ethosu.config", "ethosu.performance", "ethosu.support",
     "ethosu.compiler", "ethosu.cli"],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_summary_fields():
    perf = parse_summary_csv(SAMPLE_SUMMARY_CSV)
    assert perf.accelerator == "Ethos_U55_128"
    assert [a.name for a in perf.memory_areas] == ["sram", "off_chip_flash"]
    assert perf.off_chip_used_kib == 2.21875
    assert perf.area("sram").total_bytes == 20708
    assert math.isclose(perf.inference_time_ms, 0.013064)
    assert perf.to_dict()["memory_areas"]["sram"]["access_cycles"] == 2518
    with pytest.raises(KeyError):
        perf.area("dram")


def test_per_layer_name_with_comma():
    layers = parse_per_layer_csv(SAMPLE_PER_LAYER_CSV)
    assert layers[1].name == "t,1"
    assert layers[1].access_cycles["off_chip_flash"] == 1520


def test_summary_must_have_one_row():
    header = SAMPLE_SUMMARY_CSV.splitlines()[0]
    with pytest.raises(ValueError):
        parse_summary_csv(header + "\n")
