"""Standard architectures nobody here wrote, built in code at small sizes (random weights, eval
mode, nothing downloaded): torchvision segmentation heads, HuggingFace transformers from tiny
configs, audio/keyword-spotting nets, RNNs, decoders. Used by ``benchmarks/probe_architectures.py``
(the survey) and ``test_architectures.py`` (the slow full-model tests).

Each entry of :data:`BUILDERS` returns a module whose forward takes tensors and returns one
tensor (HuggingFace outputs reduced to ``last_hidden_state`` / ``logits``); :func:`build` adds
the seeded example and calibration inputs, as ``tosa-verify check`` takes them.
"""

from __future__ import annotations

import torch
import tv_models
from torch import nn


class _First(nn.Module):
    """The first output of a model that returns a tuple or a HuggingFace ModelOutput."""

    def __init__(self, model: nn.Module, key: str | None = None):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, *args):
        out = self.model(*args)
        if self.key is not None:
            return out[self.key]
        return out[0] if isinstance(out, (tuple, list)) else out


def _tv_seg(name: str):
    tv = tv_models.import_torchvision()
    return _First(getattr(tv.models.segmentation, name)(
        weights=None, weights_backbone=None, num_classes=4, aux_loss=False), "out")


def _transformers():
    tv_models.import_torchvision()  # transformers imports torchvision when it is installed
    import transformers

    return transformers


def _hf(config_cls: str, model_cls: str, key: str | None, **cfg):
    transformers = _transformers()

    config = getattr(transformers, config_cls)(**cfg)
    config._attn_implementation = "eager"
    model = getattr(transformers, model_cls)(config)
    return model if key is None else _First(model, key)


_BERT = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=32)


class _Tokens(nn.Module):
    """A text model fed fixed token ids (ids are not quantizable): the input is the embedding."""

    def __init__(self, model: nn.Module, mask: bool = False):
        super().__init__()
        self.model, self.mask = model, mask

    def forward(self, embeds):
        kwargs = {"inputs_embeds": embeds}
        if self.mask:  # the last two positions padded: the extended mask's -inf path
            m = torch.ones(embeds.shape[:2], dtype=torch.long)
            m[:, -2:] = 0
            kwargs["attention_mask"] = m
        return self.model(**kwargs)[0]


class _KwsCnn(nn.Module):
    """A DS-CNN keyword spotter: conv stem, depthwise-separable blocks, average pool, linear."""

    def __init__(self):
        super().__init__()
        layers = [nn.Conv2d(1, 16, (5, 3), stride=(2, 1), padding=(2, 1)), nn.BatchNorm2d(16),
                  nn.ReLU()]
        for _ in range(2):
            layers += [nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU(),
                       nn.Conv2d(16, 16, 1), nn.BatchNorm2d(16), nn.ReLU()]
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Dropout(0.2), nn.Linear(16, 12))

    def forward(self, x):
        return self.body(x)


class _Conv1dNet(nn.Module):
    """A 1-D audio net (raw waveform -> classes): strided Conv1d, BN, pooling, GELU."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(1, 8, 9, stride=4, padding=4), nn.BatchNorm1d(8), nn.ReLU(),
            nn.MaxPool1d(2), nn.Conv1d(8, 16, 5, padding=2, dilation=1), nn.GELU(),
            nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=16), nn.Conv1d(16, 16, 1),
            nn.AvgPool1d(2), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 5))

    def forward(self, x):
        return self.body(x)


class _Rnn(nn.Module):
    """``kind`` (LSTM/GRU/RNN) over a sequence, then a linear on the last step."""

    def __init__(self, kind: str, layers: int = 1, bidirectional: bool = False):
        super().__init__()
        self.rnn = getattr(nn, kind)(8, 12, num_layers=layers, batch_first=True,
                                     bidirectional=bidirectional)
        self.fc = nn.Linear(12 * (2 if bidirectional else 1), 4)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


class _Decoder(nn.Module):
    """A small U-Net-ish decoder: ConvTranspose2d, bilinear and nearest upsampling, a skip
    concat, pixel shuffle."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.down2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.mix = nn.Conv2d(16, 8, 3, padding=1)
        self.shuf = nn.Sequential(nn.Conv2d(8, 12, 3, padding=1), nn.PixelShuffle(2))

    def forward(self, x):
        a = self.down(x)
        b = self.down2(a)
        u = torch.cat([self.up(b), a], 1)
        m = torch.relu(self.mix(u))
        bil = nn.functional.interpolate(m, scale_factor=2, mode="bilinear", align_corners=False)
        near = nn.functional.interpolate(b, size=m.shape[-2:], mode="nearest")
        return self.shuf(m + near.mean(1, keepdim=True)) + bil[:, :3]


class _MaskedAttention(nn.Module):
    """nn.MultiheadAttention with a causal mask and a key-padding mask, then a LayerNorm."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = nn.LayerNorm(16)
        self.register_buffer("causal", torch.triu(torch.full((6, 6), float("-inf")), 1))
        self.register_buffer("pad", torch.tensor([[False] * 4 + [True] * 2]))

    def forward(self, x):
        y, _ = self.attn(x, x, x, attn_mask=self.causal, key_padding_mask=self.pad,
                         need_weights=False)
        return self.norm(x + y)


class _SdpaCausal(nn.Module):
    """F.scaled_dot_product_attention with is_causal and with a boolean mask."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.register_buffer("keep", torch.rand(6, 6) > 0.3)

    def forward(self, x):
        q, k, v = self.qkv(x).view(1, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        b = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.keep | torch.eye(
            6, dtype=torch.bool))
        return (a + b).transpose(1, 2).reshape(1, 6, 16)


def _text(model_fn, mask=False):
    return lambda: _Tokens(model_fn(), mask)


#: name -> (builder, example input shape)
BUILDERS = {
    "deeplabv3_mobilenet_v3_large": (lambda: _tv_seg("deeplabv3_mobilenet_v3_large"), (1, 3, 64, 64)),
    "lraspp_mobilenet_v3_large": (lambda: _tv_seg("lraspp_mobilenet_v3_large"), (1, 3, 64, 64)),
    "fcn_resnet50": (lambda: _tv_seg("fcn_resnet50"), (1, 3, 32, 32)),
    "hf_bert": (_text(lambda: _hf("BertConfig", "BertModel", None, **_BERT), True),
                (1, 8, 32)),
    "hf_distilbert": (_text(lambda: _hf("DistilBertConfig", "DistilBertModel", None,
                                        vocab_size=64, dim=32, n_layers=2, n_heads=2,
                                        hidden_dim=64, max_position_embeddings=32), True),
                      (1, 8, 32)),
    "hf_gpt2": (_text(lambda: _hf("GPT2Config", "GPT2Model", None, vocab_size=64,
                                  n_embd=32, n_layer=2, n_head=2, n_positions=32, use_cache=False)),
                (1, 8, 32)),
    "hf_vit": (lambda: _hf("ViTConfig", "ViTModel", "last_hidden_state", image_size=32,
                           patch_size=8, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64), (1, 3, 32, 32)),
    "hf_mobilevit": (lambda: _hf("MobileViTConfig", "MobileViTForImageClassification", "logits",
                                 image_size=64, patch_size=2, hidden_sizes=[16, 24, 32],
                                 neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                                 num_attention_heads=2, num_labels=5), (1, 3, 64, 64)),
    "hf_convnext": (lambda: _hf("ConvNextConfig", "ConvNextForImageClassification", "logits",
                                num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5),
                    (1, 3, 32, 32)),
    "hf_resnet": (lambda: _hf("ResNetConfig", "ResNetForImageClassification", "logits",
                              embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                              num_labels=5), (1, 3, 32, 32)),
    "hf_whisper_encoder": (lambda: _First(_whisper_encoder(), "last_hidden_state"), (1, 8, 32)),
    "hf_wav2vec2_features": (lambda: _wav2vec2_features(), (1, 400)),
    "kws_dscnn": (_KwsCnn, (1, 1, 49, 10)),
    "conv1d_audio": (_Conv1dNet, (1, 1, 256)),
    "lstm": (lambda: _Rnn("LSTM"), (1, 6, 8)),
    "lstm_2layer_bi": (lambda: _Rnn("LSTM", 2, True), (1, 6, 8)),
    "gru": (lambda: _Rnn("GRU"), (1, 6, 8)),
    "rnn_tanh": (lambda: _Rnn("RNN"), (1, 6, 8)),
    "decoder_upsample": (_Decoder, (1, 3, 32, 32)),
    "mha_masked": (_MaskedAttention, (1, 6, 16)),
    "sdpa_masks": (_SdpaCausal, (1, 6, 16)),
}


def _whisper_encoder():
    transformers = _transformers()

    config = transformers.WhisperConfig(vocab_size=64, num_mel_bins=8, d_model=32,
                                        encoder_layers=2, encoder_attention_heads=2,
                                        decoder_layers=1, decoder_attention_heads=2,
                                        encoder_ffn_dim=64, decoder_ffn_dim=64,
                                        max_source_positions=16, max_target_positions=16,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                        decoder_start_token_id=1)
    config._attn_implementation = "eager"
    return transformers.WhisperModel(config).get_encoder()


def _wav2vec2_features():
    transformers = _transformers()

    config = transformers.Wav2Vec2Config(conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                                         conv_kernel=(10, 3, 3), feat_extract_norm="group")
    return transformers.Wav2Vec2Model(config).feature_extractor


def build(name: str, seed: int = 0, calibration_batches: int = 4):
    """Architecture ``name`` (a key of :data:`BUILDERS`) with seeded random weights, an example
    input and calibration inputs (seeded noise, then the example).

    Example:
        >>> model, example, calibration = build("lstm")
        >>> tuple(example[0].shape), len(calibration)
        ((1, 6, 8), 5)
    """
    torch.manual_seed(seed)
    fn, shape = BUILDERS[name]
    model = fn().eval()
    gen = torch.Generator().manual_seed(seed + 1)
    example = (torch.randn(*shape, generator=gen),)
    calibration = [(torch.randn(*shape, generator=gen),) for _ in range(calibration_batches)]
    return model, example, calibration + [example]


def held_out(name: str, n: int = 4, seed: int = 123) -> list[tuple[torch.Tensor]]:
    """Inputs no calibration saw, shaped as ``name`` takes them.

    Example:
        >>> tuple(held_out("lstm", 2)[1][0].shape)
        (1, 6, 8)
    """
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(*BUILDERS[name][1], generator=gen),) for _ in range(n)]
