"""torchvision classifiers as test models (random weights, eval mode, 96x96 inputs; the
:data:`MORE_MODELS` at the small size each accepts).

torchvision 0.28.0 is the release that matches torch 2.13. PyPI's wheel is a CUDA build; its
native library cannot register ``torchvision::nms`` beside the CPU torch, and
``torchvision._meta_registrations`` fails on import. The classification models need none of
torchvision's custom ops, so :func:`import_torchvision` registers an empty module under that
name first. Nothing is downloaded: every model is built with random weights.

Each factory returns ``(model, example_inputs, calibration)`` as ``tosa-verify check`` takes
it, e.g. ``tosa-verify check tests/lowering/tv_models.py:resnet18``.
"""

from __future__ import annotations

import torch

from lowering.torchvision_compat import allow_cpu_torchvision

#: The models the lowering must take whole (INT and FP) and Vela must place on the NPU.
MODELS = ("mobilenet_v2", "mobilenet_v3_small", "resnet18", "shufflenet_v2_x0_5", "squeezenet1_1")
SIZE = 96
#: More architectures, each at a small input it accepts (lowered whole, INT bit-exact and FP;
#: not compiled by Vela in the tests): name -> input height and width. swin_t: INT equal to
#: float64 fake-quant since its softmax reciprocal TABLE is built in float64 (ties).
MORE_MODELS = {"mobilenet_v3_large": 64, "googlenet": 64, "convnext_tiny": 64,
               "squeezenet1_0": 64, "shufflenet_v2_x1_0": 64, "regnet_x_400mf": 64,
               "resnet34": 64, "alexnet": 64, "vgg11": 64, "swin_t": 64}
#: Probed whole and exact too (``benchmarks/probe_torchvision.py``) but slow or uninformative
#: here: densenet121 and regnet_y_400mf (minutes to lower), and mnasnet* / efficientnet_b*,
#: whose random-init outputs are ~1e-8 / ~1e-14 (torchvision's init), so INT is trivially exact.
#: Constructor arguments a model needs for random weights at a small input.
_KWARGS = {"googlenet": {"aux_logits": False, "init_weights": True},
           "inception_v3": {"aux_logits": False, "init_weights": True}}


def import_torchvision():
    """``import torchvision`` beside the CPU torch (see the module docstring).

    Example:
        >>> import_torchvision().__version__.split("+")[0]
        '0.28.0'
    """
    allow_cpu_torchvision()
    import torchvision

    return torchvision


def build(name: str, seed: int = 0, calibration_batches: int = 4, size: int | None = None):
    """torchvision model ``name`` with seeded random weights, an example input and
    calibration inputs (seeded noise, then the example); 1x3xSIZExSIZE, or the size
    :data:`MORE_MODELS` gives (``size`` overrides both).

    Example:
        >>> model, example, calibration = build("squeezenet1_1")
        >>> tuple(example[0].shape), len(calibration)
        ((1, 3, 96, 96), 5)
    """
    tv = import_torchvision()
    torch.manual_seed(seed)
    size = size or MORE_MODELS.get(name, SIZE)
    kwargs = {**_KWARGS.get(name, {}), **({"image_size": size} if name.startswith("vit_") else {})}
    model = getattr(tv.models, name)(weights=None, **kwargs).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    example = (torch.randn(1, 3, size, size, generator=gen),)
    calibration = [(torch.randn(1, 3, size, size, generator=gen),)
                   for _ in range(calibration_batches)] + [example]
    return model, example, calibration


def held_out(n: int = 4, seed: int = 123, size: int = SIZE) -> list[tuple[torch.Tensor]]:
    """Inputs no calibration saw, 1x3x``size``x``size``.

    Example:
        >>> tuple(held_out(2, size=64)[1][0].shape)
        (1, 3, 64, 64)
    """
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(1, 3, size, size, generator=gen),) for _ in range(n)]


def _factory(name: str):
    def factory():
        return build(name)

    factory.__name__ = name
    size = MORE_MODELS.get(name, SIZE)
    factory.__doc__ = f"torchvision {name}, random weights, 1x3x{size}x{size}."
    return factory


for _name in (*MODELS, *MORE_MODELS):
    globals()[_name] = _factory(_name)
