"""Models as users bring them, beyond ``arch_models``: HuggingFace tiny configs not surveyed
there (built in code, random weights, nothing downloaded), torchvision video / detection
backbones, and small modules with user-code quirks (in-place ops, python scalars in every
position, integer index inputs, dict / tuple / nested outputs, tensors made inside forward,
``.item()`` and data-dependent control flow). Used by ``benchmarks/probe_quirks.py``.

Each entry of :data:`BUILDERS` returns ``(model, example_inputs)``; :func:`build` adds the
calibration batches (seeded noise for the float inputs, the integer inputs as given, then the
example), as ``tosa-verify check`` takes them: every key is a factory of this module too, e.g.
``tosa-verify check tests/lowering/quirk_models.py:q_inplace``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# `tosa-verify check tests/lowering/quirk_models.py:q_inplace` imports this file by path:
# its sibling modules are importable from here then too
sys.path.insert(0, str(Path(__file__).resolve().parent))
from arch_models import _hf, _Tokens  # noqa: E402


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _ids(*shape, high=32, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- user quirks
class InPlaceAll(nn.Module):
    """Every in-place spelling: add_, mul_, relu_, clamp_, sigmoid_, masked_fill_, slice write,
    ``+=``, ``out=``."""

    def forward(self, x):
        y = x * 1.0
        y.add_(0.5)
        y.mul_(x)
        y += x
        y.clamp_(-2.0, 2.0)
        z = y.clone().relu_()
        y.sigmoid_()
        y.masked_fill_(x > 1.0, 0.0)
        y[:, 0] = 0.25
        out = torch.empty(y.shape)
        torch.mul(y, 3.0, out=out)  # an ``out=`` argument (aten.mul.out)
        torch.add(out, z, out=out)
        return y + z + out


class Scalars(nn.Module):
    """Python numbers in every position of the arithmetic."""

    def forward(self, x):
        a = 2 * x + x / 3 - x ** 2
        b = torch.clamp(x, min=0.5) + torch.where(x > 0, x, 0.0) + (1 - x)
        c = torch.clamp(x, max=-0.25) * 0.5 + torch.pow(x, 3) - 3 / (x.abs() + 1)
        return a + b + c


class EmbedGather(nn.Module):
    """int64 index inputs: an embedding, gather and index_select driven by token ids."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, ids, idx):
        e = self.proj(self.emb(ids))                       # (1, 6, 8)
        g = torch.gather(e, 1, idx.unsqueeze(-1).expand(-1, -1, 8))
        s = torch.index_select(e, 1, idx[0])
        return g + s


class DictOut(nn.Module):
    """Returns a dict holding a tuple and a list (nested outputs)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x, y):
        h = self.fc(x)
        return {"logits": h, "pair": (h.relu(), y * 2), "more": [h + y.mean()]}


class SharedParams(nn.Module):
    """One Linear applied twice, a buffer read twice, two inputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("offset", torch.linspace(-1, 1, 8))

    def forward(self, x, y):
        a = self.fc(x) + self.offset
        b = self.fc(y) - self.offset
        return torch.tanh(self.fc(a * b))


class MadeInForward(nn.Module):
    """Tensors built inside forward: arange, zeros, ones, full, *_like."""

    def forward(self, x):
        pos = torch.arange(x.shape[-1], dtype=torch.float32) / x.shape[-1]
        z = torch.zeros(x.shape[0], 1, x.shape[-1])
        o = torch.ones_like(x) * 0.5
        f = torch.full((x.shape[0], 1, x.shape[-1]), 0.25)
        return x + pos + torch.cat([z, f, o[:, 2:]], 1)


class Interp(nn.Module):
    """F.interpolate with scale_factor (nearest and bilinear, align_corners both ways)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        a = F.interpolate(y, scale_factor=2, mode="nearest")
        b = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=True)
        c = F.interpolate(y, scale_factor=2, mode="bilinear")
        return a + b + c


class SplitStack(nn.Module):
    """chunk / split / unbind / stack."""

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        c, d, e = torch.split(x, [1, 2, 1], dim=1)
        rows = x.unbind(2)
        return torch.stack([a * b, c.expand_as(a) + d[:, :1] * e], 0).sum(0) + \
            torch.stack(rows, 2).mean(1, keepdim=True)


class Einsum(nn.Module):
    """einsum in its common spellings (batched matmul, outer product, contraction)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(_x(8, 5, seed=3))

    def forward(self, x, y):
        a = torch.einsum("bij,jk->bik", x, self.w)
        b = torch.einsum("bik,bjk->bij", a, a)
        c = torch.einsum("bi,bj->bij", y, y)
        return b + c


class CumFlipRoll(nn.Module):
    """cumsum, flip, roll."""

    def forward(self, x):
        return torch.cumsum(x, dim=-1) + torch.flip(x, [1]) + torch.roll(x, 2, dims=-1) + \
            torch.roll(x, (1, -1), dims=(1, 2))


class Norms(nn.Module):
    """GroupNorm and InstanceNorm2d (affine), LayerNorm over two dims."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 8)
        self.inn = nn.InstanceNorm2d(8, affine=True)
        self.ln = nn.LayerNorm([6, 6])
        with torch.no_grad():
            for m in (self.gn, self.inn):
                m.weight.normal_(1.0, 0.3)
                m.bias.normal_(0.0, 0.3)

    def forward(self, x):
        return self.gn(x) + self.inn(x) * 0.5 + self.ln(x)


class ArgmaxTopk(nn.Module):
    """argmax / topk as outputs (integer indices next to values)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        y = self.fc(x)
        v, i = torch.topk(y, 3, dim=-1)
        return y.argmax(-1), v, i


class Item(nn.Module):
    """.item() into python arithmetic: export must refuse with a clear error."""

    def forward(self, x):
        return x * x.max().item()


class DataDependent(nn.Module):
    """Python control flow on a tensor's value: export must refuse with a clear error."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class BoolMask(nn.Module):
    """A bool tensor input used as a mask, an int tensor input used as data."""

    def forward(self, x, mask, n):
        return torch.where(mask, x, -x) + n.float() * 0.5


class Activations(nn.Module):
    """The functional activations users spell by hand or with arguments."""

    def forward(self, x):
        return (F.gelu(x, approximate="tanh") + F.silu(x) + F.mish(x) + F.hardsigmoid(x)
                + F.leaky_relu(x, 0.2) + F.elu(x) + F.softplus(x) + x * torch.sigmoid(1.702 * x)
                + 0.5 * x * (1 + torch.erf(x / 2 ** 0.5)))


class Reductions(nn.Module):
    """Reductions with their arguments: var/std (unbiased), logsumexp, norm, log_softmax, a
    hand-written softmax, amax over two dims, max(dim) as a (values, indices) pair."""

    def forward(self, x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        v, i = torch.max(x, dim=1)
        return (x.var(-1, keepdim=True) + x.std(-1, unbiased=False, keepdim=True)
                + torch.logsumexp(x, -1, keepdim=True) + F.normalize(x, dim=-1)
                + F.log_softmax(x, -1) + e / e.sum(-1, keepdim=True)
                + x.amax((1, 2), keepdim=True)), v, i


class BoolLogic(nn.Module):
    """Boolean algebra on comparisons, ~, any/all, a masked write and a float cast of a
    bool."""

    def forward(self, x, y):
        m = (x > 0) & ~(y < -0.5) | (x > y)
        z = x.clone()
        z[m] = 0.0
        both = m.any(-1, keepdim=True) & m.all(-1, keepdim=True).logical_not()
        return z + m.float() * y + both.to(x.dtype)


class PoolPad(nn.Module):
    """Reflect / replicate padding, ceil-mode pooling without counting the padding,
    padding="same" dilated conv, pixel_unshuffle."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding="same", dilation=2)

    def forward(self, x):
        a = F.pad(x, (1, 1, 2, 2), mode="reflect")
        b = F.pad(x, (1, 1, 1, 1), mode="replicate")
        p = F.avg_pool2d(a, 3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        q = F.max_pool2d(b, 2, ceil_mode=True)
        return self.conv(x) + F.interpolate(p, size=x.shape[-2:]) + \
            F.pixel_unshuffle(x, 2).mean(1, keepdim=True).repeat_interleave(2, -1)[..., :6] \
            .repeat_interleave(2, -2)[..., :6, :] + q.mean()


class MatmulBroadcast(nn.Module):
    """``@`` with broadcasting, bmm, addmm / baddbmm with alpha and beta, a scalar tensor
    constant made in forward."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(_x(8, 8, seed=4))
        self.b = nn.Parameter(_x(8, seed=5))

    def forward(self, x):
        a = x @ self.w                                   # (2, 3, 8) @ (8, 8)
        b = torch.bmm(a, a.transpose(1, 2))              # (2, 3, 3)
        c = torch.baddbmm(b, a, a.transpose(1, 2), beta=0.5, alpha=0.25)
        d = torch.addmm(self.b, x[0], self.w, beta=2.0, alpha=0.5)
        return c @ a + d + torch.tensor(0.125)


class SortOneHot(nn.Module):
    """sort / argsort / one_hot: no TOSA operator of their own, all decomposed (sorting by
    pairwise comparison: lowering.passes.decompositions.sorting)."""

    def forward(self, x):
        s, _ = torch.sort(x, -1)
        idx = torch.argsort(x, -1)
        oh = F.one_hot(idx[:, 0], x.shape[-1]).to(x.dtype)
        return s * 2 + oh


class Float64Buffers(nn.Module):
    """Buffers made with numpy (float64): a 0-d scale and a vector cast with ``.float()``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor(np.float64(0.75)))
        self.register_buffer("offset", torch.from_numpy(np.linspace(-1.0, 1.0, 6)))

    def forward(self, x):
        return x * self.scale + self.offset.float() + (x > self.scale).float()


class RmsFmod(nn.Module):
    """nn.RMSNorm (torch >= 2.4, modern LLM code) and fmod by a python number."""

    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(6, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.3)

    def forward(self, x):
        return self.norm(x) + torch.fmod(x, 0.3)


def _quirks():
    return {
        "q_inplace": lambda: (InPlaceAll(), (_x(2, 5),)),
        "q_scalars": lambda: (Scalars(), (_x(2, 7),)),
        "q_embed_gather": lambda: (EmbedGather(), (_ids(1, 6), _ids(1, 6, high=6, seed=1))),
        "q_dict_out": lambda: (DictOut(), (_x(2, 6), _x(2, 4, seed=1))),
        "q_shared_params": lambda: (SharedParams(), (_x(2, 8), _x(2, 8, seed=1))),
        "q_made_in_forward": lambda: (MadeInForward(), (_x(2, 4, 6),)),
        "q_interpolate": lambda: (Interp(), (_x(1, 3, 6, 6),)),
        "q_split_stack": lambda: (SplitStack(), (_x(1, 4, 3, 5),)),
        "q_einsum": lambda: (Einsum(), (_x(2, 3, 8), _x(2, 3, seed=1))),
        "q_cumsum_flip_roll": lambda: (CumFlipRoll(), (_x(1, 4, 6),)),
        "q_norms": lambda: (Norms(), (_x(1, 8, 6, 6),)),
        "q_argmax_topk": lambda: (ArgmaxTopk(), (_x(2, 8),)),
        "q_item": lambda: (Item(), (_x(2, 3),)),
        "q_data_dependent": lambda: (DataDependent(), (_x(2, 3),)),
        "q_bool_int_inputs": lambda: (BoolMask(), (_x(2, 5), _x(2, 5, seed=1) > 0,
                                                   _ids(2, 5, high=9))),
        "q_activations": lambda: (Activations(), (_x(2, 16) * 3,)),
        "q_reductions": lambda: (Reductions(), (_x(2, 4, 6),)),
        "q_bool_logic": lambda: (BoolLogic(), (_x(2, 6), _x(2, 6, seed=1))),
        "q_pool_pad": lambda: (PoolPad(), (_x(1, 4, 6, 6),)),
        "q_matmul_broadcast": lambda: (MatmulBroadcast(), (_x(2, 3, 8),)),
        "q_sort_onehot": lambda: (SortOneHot(), (_x(2, 6),)),
        "q_float64_buffers": lambda: (Float64Buffers(), (_x(2, 6),)),
        "q_rmsnorm_fmod": lambda: (RmsFmod(), (_x(2, 3, 6),)),
    }


# --------------------------------------------------------------------------- HF tiny configs
_TXT = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
_DEC = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=64, max_position_embeddings=32,
            use_cache=False)


def _text(config_cls, model_cls, mask=True, width=32, **cfg):
    return lambda: (_Tokens(_hf(config_cls, model_cls, None, **cfg), mask), (_x(1, 8, width),))


def _informative(model: nn.Module) -> nn.Module:
    """Re-initialise convolutions, linears and norms at unit gain: HF's conv-net inits
    (MobileNetV2, EfficientNet) give ~1e-25 or all-zero logits at random weights, which any
    lowering matches trivially."""
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / fan_in ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.fill_(1.0)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    return model


def _image(config_cls, model_cls, key, size=32, reinit=False, **cfg):
    def make():
        model = _hf(config_cls, model_cls, key, **cfg)
        return _informative(model) if reinit else model

    return lambda: (make(), (_x(1, 3, size, size),))


def _hf_models():
    return {
        "hf_albert": _text("AlbertConfig", "AlbertModel", width=16, embedding_size=16, **_TXT),
        "hf_roberta": _text("RobertaConfig", "RobertaModel", pad_token_id=1, **{
            **_TXT, "max_position_embeddings": 40}),
        "hf_llama": _text("LlamaConfig", "LlamaModel", False, **_DEC),
        "hf_qwen2": _text("Qwen2Config", "Qwen2Model", False, **_DEC),
        "hf_mistral": _text("MistralConfig", "MistralModel", False, sliding_window=None, **_DEC),
        "hf_phi": _text("PhiConfig", "PhiModel", False, **_DEC),
        "hf_bart_encoder": lambda: (_Tokens(_hf("BartConfig", "BartModel", None, vocab_size=64,
                                                d_model=32, encoder_layers=2, decoder_layers=1,
                                                encoder_attention_heads=2,
                                                decoder_attention_heads=2, encoder_ffn_dim=64,
                                                decoder_ffn_dim=64,
                                                max_position_embeddings=32).get_encoder(), True),
                                    (_x(1, 8, 32),)),
        "hf_deit": _image("DeiTConfig", "DeiTModel", "last_hidden_state", image_size=32,
                          patch_size=8, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64),
        "hf_swin": _image("SwinConfig", "SwinModel", "last_hidden_state", image_size=32,
                          patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                          window_size=4),
        "hf_segformer": _image("SegformerConfig", "SegformerForSemanticSegmentation", "logits",
                               num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                               hidden_sizes=[8, 16], num_attention_heads=[1, 2],
                               decoder_hidden_size=16, num_labels=3, patch_sizes=[7, 3],
                               strides=[4, 2]),
        "hf_mobilenet_v2": _image("MobileNetV2Config", "MobileNetV2ForImageClassification",
                                  "logits", reinit=True, depth_multiplier=0.35,
                                  num_labels=5),
        "hf_efficientnet": _image("EfficientNetConfig", "EfficientNetForImageClassification",
                                  "logits", reinit=True, image_size=32, width_coefficient=0.1,
                                  depth_coefficient=0.1, hidden_dim=128, num_labels=5),
        "hf_clip_vision": _image("CLIPVisionConfig", "CLIPVisionModel", "last_hidden_state",
                                 image_size=32, patch_size=8, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64),
    }


def _tv_video_detection():
    import tv_models

    def r3d():
        tv = tv_models.import_torchvision()
        return tv.models.video.r3d_18(num_classes=4), (_x(1, 3, 4, 32, 32),)

    def raft():
        tv = tv_models.import_torchvision()
        return (_RaftLast(tv.models.optical_flow.raft_small(weights=None)),
                (_x(1, 3, 128, 128), _x(1, 3, 128, 128, seed=1)))

    def fpn_backbone():
        tv_models.import_torchvision()
        from torchvision.models.detection.backbone_utils import mobilenet_backbone
        return _Values(_informative(mobilenet_backbone(
            backbone_name="mobilenet_v3_small", weights=None, fpn=True, trainable_layers=6))), \
            (_x(1, 3, 64, 64),)

    return {"tv_r3d_18": r3d, "tv_raft_small": raft, "tv_fpn_mobilenet": fpn_backbone}


class _RaftLast(nn.Module):
    """RAFT's last flow estimate after two refinement steps."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, a, b):
        return self.model(a, b, num_flow_updates=2)[-1]


class _Values(nn.Module):
    """The values of a module returning an OrderedDict (detection backbones), as a tuple."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return tuple(self.model(x).values())


#: name -> builder returning (model, example_inputs)
BUILDERS = {**_quirks(), **_hf_models(), **_tv_video_detection()}


def build(name: str, seed: int = 0, calibration_batches: int = 4):
    """Model ``name`` (a key of :data:`BUILDERS`, seeded weights), its example inputs and
    calibration batches (seeded noise like each float input, integer inputs as given, then
    the example).

    Example:
        >>> model, example, calibration = build("q_scalars")
        >>> tuple(example[0].shape), len(calibration)
        ((2, 7), 5)
    """
    torch.manual_seed(seed)
    model, example = BUILDERS[name]()
    model = model.eval()
    gen = torch.Generator().manual_seed(seed + 1)
    calibration = [tuple(torch.randn(x.shape, generator=gen) if x.is_floating_point() else x
                         for x in example) for _ in range(calibration_batches)]
    return model, example, calibration + [example]


def __getattr__(name: str):
    """``quirk_models.NAME`` for a key of :data:`BUILDERS`: a factory ``tosa-verify check`` calls.

    Example:
        >>> model, example, calibration = __getattr__("q_scalars")()
        >>> type(model).__name__
        'Scalars'
    """
    if name in BUILDERS:
        return lambda: build(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
