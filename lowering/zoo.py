"""A small model zoo built in code (no downloads): each factory returns
``(module, example_inputs, calibration)`` with deterministic weights.

Example:
    >>> m, ex, cal = MODELS["mlp"]()
    >>> m(*ex).shape, len(cal) > 0
    (torch.Size([4, 10]), True)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

CACHE_DIR = Path(os.environ.get("TOSA_VERIFY_CACHE", Path.home() / ".cache" / "tosa-verify"))


def _seeded(seed: int):
    return torch.random.fork_rng(devices=[])


def _settle_batch_norm(model: nn.Module, shape, batches: int = 4, seed: int = 0) -> None:
    """Give BN layers realistic running statistics with a few train-mode passes."""
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape, generator=gen))
    model.eval()


def _calibration(shape, n=8, seed=1, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=gen) * scale,) for _ in range(n)]


# ----------------------------------------------------------------------------- digits
def digits_data():
    """scikit-learn's bundled 8x8 digits as tensors: (x_train, y_train, x_test, y_test).

    Example:
        >>> xtr, ytr, xte, yte = digits_data()
        >>> tuple(xte.shape[1:]), int(ytr.max())
        ((1, 8, 8), 9)
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    idx = torch.arange(len(y)).numpy()
    tr, te = train_test_split(idx, test_size=0.25, random_state=0, stratify=d.target)
    return x[tr], y[tr], x[te], y[te]


class DigitsCNN(nn.Module):
    """conv-relu-conv-relu-maxpool-linear-relu-linear on 1x8x8 digits."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def train_digits_cnn(epochs: int = 40, seed: int = 0) -> DigitsCNN:
    """Train :class:`DigitsCNN` in a few seconds (cached under ``~/.cache/tosa-verify``)."""
    path = CACHE_DIR / f"digits_cnn_e{epochs}_s{seed}.pt"
    model = DigitsCNN()
    if path.exists():
        try:
            model.load_state_dict(torch.load(path, weights_only=True))
            return model.eval()
        except Exception:  # noqa: BLE001 - stale cache: retrain
            pass
    with _seeded(seed):
        torch.manual_seed(seed)
        model = DigitsCNN()
        xtr, ytr, _, _ = digits_data()
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(epochs):
            perm = torch.randperm(len(ytr), generator=gen)
            for i in range(0, len(perm), 64):
                b = perm[i:i + 64]
                opt.zero_grad()
                F.cross_entropy(model(xtr[b]), ytr[b]).backward()
                opt.step()
    model.eval()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return model


def digits_cnn():
    model = train_digits_cnn()
    xtr, _, xte, _ = digits_data()
    calib = [(xtr[i:i + 32],) for i in range(0, 256, 32)]
    return model, (xte[:8],), calib


# ----------------------------------------------------------------------------- MobileNetV2
def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU6(nn.Sequential):
    def __init__(self, cin, cout, k=3, stride=1, groups=1):
        super().__init__(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res = stride == 1 and cin == cout
        layers = [] if expand == 1 else [ConvBNReLU6(cin, hidden, 1)]
        layers += [ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (inverted residuals, linear bottlenecks) with a width multiplier."""

    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, width_mult: float = 0.35, num_classes: int = 1000):
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        last = _make_divisible(1280 * max(1.0, width_mult))
        feats = [ConvBNReLU6(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                feats.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        feats.append(ConvBNReLU6(cin, last, 1))
        self.features = nn.Sequential(*feats)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


def _damp_residual_branches(model: nn.Module, scale: float) -> None:
    """Scale the last BN of every residual branch, so a block adds a correction to its input.

    A trained MobileNetV2's (or ResNet's) residual branches are small next to the skip path. A random
    init with BN statistics settled on noise is not like that: every block adds a
    unit-variance signal and a perturbation grows by a constant factor per block, so the
    network is chaotic. Undamped (``scale=1``), the fake-quant net's own SQNR against float
    falls to 13.6 dB at the logits (2.4 dB at the last conv), and a single one-step
    rounding difference anywhere becomes tens of steps downstream. No deployable network
    behaves like that, so the zoo model damps its branches by default.
    """
    for block in model.modules():
        if isinstance(block, InvertedResidual) and block.use_res:
            bn = block.conv[-1]
        elif isinstance(block, BasicBlock):
            bn = block.bn2
        else:
            continue
        with torch.no_grad():
            bn.weight.mul_(scale)
            bn.bias.mul_(scale)


def mobilenet_v2(width_mult: float = 0.35, residual_scale: float = 0.2):
    """MobileNetV2 at 224x224 with BN statistics settled on noise and damped residual branches.

    ``residual_scale`` multiplies the last BN of each residual branch (see
    :func:`_damp_residual_branches`); 1.0 gives the undamped, chaotic random network.

    Example:
        >>> m, ex, cal = mobilenet_v2()
        >>> tuple(m(*ex).shape)
        (1, 1000)
    """
    with _seeded(0):
        torch.manual_seed(0)
        m = MobileNetV2(width_mult)
    _settle_batch_norm(m, (2, 3, 224, 224))
    _damp_residual_branches(m, residual_scale)
    return m, (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(7)),), \
        _calibration((1, 3, 224, 224), n=4)


# ----------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    """CIFAR-style ResNet (3 stages of basic blocks)."""

    def __init__(self, widths=(16, 32, 64), blocks=(2, 2, 2), num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers, cin = [], widths[0]
        for i, (w, n) in enumerate(zip(widths, blocks, strict=True)):
            for j in range(n):
                layers.append(BasicBlock(cin, w, 2 if (j == 0 and i > 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def resnet(residual_scale: float = 0.2):
    """CIFAR-style ResNet at 32x32, BN settled on noise, residual branches damped like mobilenet_v2's.

    Example:
        >>> m, ex, cal = resnet()
        >>> tuple(m(*ex).shape)
        (1, 10)
    """
    with _seeded(0):
        torch.manual_seed(0)
        m = ResNet()
    _settle_batch_norm(m, (4, 3, 32, 32))
    _damp_residual_branches(m, residual_scale)
    return m, (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(7)),), \
        _calibration((2, 3, 32, 32))


# ----------------------------------------------------------------------------- DS-CNN
class DSCNN(nn.Module):
    """Keyword-spotting DS-CNN: conv stem, 4 depthwise-separable blocks, avg pool, FC."""

    def __init__(self, ch=64, num_classes=12):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, ch, (10, 4), (2, 2), (5, 1), bias=False),
                                  nn.BatchNorm2d(ch), nn.ReLU())
        blocks = []
        for _ in range(4):
            blocks += [nn.Conv2d(ch, ch, 3, 1, 1, groups=ch, bias=False), nn.BatchNorm2d(ch),
                       nn.ReLU(), nn.Conv2d(ch, ch, 1, bias=False), nn.BatchNorm2d(ch), nn.ReLU()]
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(ch, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        x = F.avg_pool2d(x, x.shape[-2:]).flatten(1)
        return self.fc(x)


def ds_cnn():
    with _seeded(0):
        torch.manual_seed(0)
        m = DSCNN()
    _settle_batch_norm(m, (4, 1, 49, 10))
    return m, (torch.randn(1, 1, 49, 10, generator=torch.Generator().manual_seed(7)),), \
        _calibration((2, 1, 49, 10))


# ----------------------------------------------------------------------------- transformer
class EncoderBlock(nn.Module):
    """Post-norm transformer encoder block: multi-head self-attention + GELU MLP."""

    def __init__(self, dim=64, heads=4, mlp=128):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)
        self.ln2 = nn.LayerNorm(dim)

    def forward(self, x):
        B, T, D = x.shape
        h = self.heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(B, T, h, D // h).transpose(1, 2)
        k = k.reshape(B, T, h, D // h).transpose(1, 2)
        v = v.reshape(B, T, h, D // h).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (D // h) ** -0.5, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, D)
        x = self.ln1(x + self.proj(y))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


def transformer_block():
    with _seeded(0):
        torch.manual_seed(0)
        m = EncoderBlock().eval()
    return m, (torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(7)),), \
        _calibration((1, 16, 64))


# ----------------------------------------------------------------------------- MLP
class MLP(nn.Module):
    def __init__(self, sizes=(32, 64, 64, 10)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


def mlp():
    with _seeded(0):
        torch.manual_seed(0)
        m = MLP().eval()
    return m, (torch.randn(4, 32, generator=torch.Generator().manual_seed(7)),), _calibration((4, 32))


MODELS: dict[str, Callable] = {
    "digits_cnn": digits_cnn,
    "mobilenet_v2": mobilenet_v2,
    "resnet": resnet,
    "ds_cnn": ds_cnn,
    "transformer_block": transformer_block,
    "mlp": mlp,
}
