"""The compile/support verbs as the tosa-verify CLI will wire them."""

from __future__ import annotations

import argparse
import json

import ethosu_tosa_graphs as graphs
import pytest

from ethosu.cli import add_compile_parser, add_support_parser
from tosa_verify.errors import TosaError


def _main(argv: list[str]) -> int:
    """What tosa_verify.cli.main does: dispatch, and map TosaError to exit code 2."""
    parser = argparse.ArgumentParser(prog="tosa-verify")
    sub = parser.add_subparsers(dest="verb", required=True)
    add_compile_parser(sub)
    add_support_parser(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TosaError as exc:
        print(f"tosa-verify: error: {exc}")
        return 2


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "conv.tosa"
    path.write_bytes(graphs.conv2d())
    return path


def test_compile_prints_table_and_writes_outputs(graph, tmp_path, capsys):
    out_json = tmp_path / "p.json"
    code = _main(["compile", str(graph), "--target", "ethos-u85-256", "-o", str(tmp_path / "o"),
                  "--json", str(out_json), "--layers"])
    assert code == 0
    printed = capsys.readouterr().out
    data = json.loads(out_json.read_text())
    assert f"{data['performance']['total_cycles']:,}" in printed and "sum of layers" in printed
    assert (tmp_path / "o" / "conv_vela.npz").is_file()
    assert (tmp_path / "o" / "conv_command_stream.bin").stat().st_size == data["command_stream"]["bytes"]


def test_bad_configuration_exits_2_with_choices(graph, capsys):
    assert _main(["compile", str(graph), "-t", "ethos-u55-128", "--memory-mode", "Dedicated_Sram"]) == 2
    assert "valid memory modes: Sram_Only, Shared_Sram" in capsys.readouterr().out
    assert _main(["compile", str(graph), "-t", "ethos-u77-1"]) == 2
    assert "ethos-u85-2048" in capsys.readouterr().out


def test_support_exit_codes(tmp_path, capsys):
    path = tmp_path / "and.tosa"
    path.write_bytes(graphs.bitwise_and())
    assert _main(["support", str(path), "-t", "ethos-u55-128"]) == 1
    assert "BITWISE_AND" in capsys.readouterr().out
    assert _main(["support", str(path), "-t", "ethos-u85-256", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
