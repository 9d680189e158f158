"""Regenerate the README's figures from the zoo MobileNetV2 (INT, Ethos-U55-128).

    python docs/make_readme_figures.py            # writes docs/img/mobilenet_v2_{sqnr,cycles}.png
"""

from __future__ import annotations

from pathlib import Path

import tosa_verify
from tosa_verify.report import cycles_figure, figure_png, sqnr_figure

OUT = Path(__file__).resolve().parent / "img"


def main() -> None:
    import lowering
    from ethosu.compiler import compile_tosa
    from lowering import zoo

    model, example, calibration = zoo.mobilenet_v2()
    lowered = lowering.lower(model, example, profile="INT", calibration=calibration)
    drift = tosa_verify.drift(lowered, example)
    program = compile_tosa(lowered.tosa, "ethos-u55-128")
    OUT.mkdir(exist_ok=True)
    (OUT / "mobilenet_v2_sqnr.png").write_bytes(figure_png(sqnr_figure(drift)))
    (OUT / "mobilenet_v2_cycles.png").write_bytes(figure_png(cycles_figure(drift, program)))
    print(f"wrote {OUT}/mobilenet_v2_sqnr.png and mobilenet_v2_cycles.png")


if __name__ == "__main__":
    main()
