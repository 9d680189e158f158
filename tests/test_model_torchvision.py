"""A model file that imports torchvision, checked with the CLI's model loader in a fresh
interpreter: PyPI's torchvision is a CUDA build whose first import fails beside the CPU torch
("operator torchvision::nms does not exist"); the loader mends that and imports it again."""

from __future__ import annotations

import subprocess
import sys
import textwrap

LOAD = textwrap.dedent("""
    import sys, torch
    from tosa_verify.app.models import load_model
    loaded = load_model(sys.argv[1])
    import torchvision
    assert isinstance(loaded.module, torchvision.models.MobileNetV3)
    print(tuple(loaded.module(*loaded.example_inputs).shape))
""")


def _load_in_fresh_python(spec: str) -> str:
    proc = subprocess.run([sys.executable, "-c", LOAD, spec], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_a_model_file_importing_torchvision_at_the_top(tmp_path):
    path = tmp_path / "tv_top.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torchvision

        def model():
            m = torchvision.models.mobilenet_v3_small(num_classes=7).eval()
            return m, (torch.randn(1, 3, 32, 32),)
    """))
    assert _load_in_fresh_python(f"{path}:model") == "(1, 7)"


def test_a_factory_importing_torchvision_when_called(tmp_path):
    path = tmp_path / "tv_inside.py"
    path.write_text(textwrap.dedent("""
        import torch

        def model():
            from torchvision.models import mobilenet_v3_small
            return mobilenet_v3_small(num_classes=5).eval(), (torch.randn(1, 3, 32, 32),)
    """))
    assert _load_in_fresh_python(f"{path}:model") == "(1, 5)"
