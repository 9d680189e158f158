"""torchvision's transformer classifiers at test size: the same architecture classes
(VisionTransformer, SwinTransformer v1/v2, MaxVit) with fewer layers and narrower dims, random
weights, eval mode. Nothing is downloaded (see ``tv_models.import_torchvision``).

Each factory returns ``(model, example_inputs, calibration)`` as ``tosa-verify check`` takes
it, e.g. ``tosa-verify check tests/lowering/xformer_models.py:vit``.
"""

from __future__ import annotations

import torch
import tv_models

#: name -> input height and width
SIZES = {"vit": 32, "swin": 32, "swin_v2": 32, "maxvit": 32}


def _vit(tv):
    # patch 8 on 32x32: 16 tokens + class token; the image size must be a multiple of the patch
    model = tv.models.vision_transformer.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        num_classes=10)
    # torchvision zero-initialises the class token and the head (the output would be all 0)
    with torch.no_grad():
        model.class_token.normal_(0.0, 0.5)
        model.heads.head.weight.normal_(0.0, 0.2)
        model.heads.head.bias.normal_(0.0, 0.2)
    return model


def _swin(tv, v2: bool):
    sw = tv.models.swin_transformer
    extra = {"block": sw.SwinTransformerBlockV2, "downsample_layer": sw.PatchMergingV2} \
        if v2 else {}
    # window 4 on an 8x8 map (32 / patch 4): shifted windows and their attention mask occur
    return sw.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[1, 2],
                              window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10,
                              **extra)


def _maxvit(tv):
    return tv.models.maxvit.MaxVit(input_size=(32, 32), stem_channels=16, partition_size=2,
                                   block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
                                   stochastic_depth_prob=0.0, num_classes=10)


_BUILDERS = {"vit": _vit, "swin": lambda tv: _swin(tv, False),
             "swin_v2": lambda tv: _swin(tv, True), "maxvit": _maxvit}


def build(name: str, seed: int = 0, calibration_batches: int = 4):
    """Small torchvision transformer ``name`` (a key of :data:`SIZES`), seeded random weights,
    an example input and calibration inputs (seeded noise, then the example).

    Example:
        >>> model, example, calibration = build("vit")
        >>> tuple(example[0].shape), len(calibration)
        ((1, 3, 32, 32), 5)
    """
    tv = tv_models.import_torchvision()
    torch.manual_seed(seed)
    model = _BUILDERS[name](tv).eval()
    size = SIZES[name]
    gen = torch.Generator().manual_seed(seed + 1)
    example = (torch.randn(1, 3, size, size, generator=gen),)
    calibration = [(torch.randn(1, 3, size, size, generator=gen),)
                   for _ in range(calibration_batches)] + [example]
    return model, example, calibration


def _factory(name: str):
    def factory():
        return build(name)

    factory.__name__ = name
    factory.__doc__ = f"small torchvision {name}, random weights, 1x3x{SIZES[name]}x{SIZES[name]}."
    return factory


for _name in SIZES:
    globals()[_name] = _factory(_name)
