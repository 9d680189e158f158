"""Recurrent layers (``nn.GRU``, ``nn.LSTM``, ``nn.RNN``) and their cells: ``torch.export`` keeps
``aten.gru.input`` / ``aten.lstm.input`` / ``aten.rnn_*.input`` whole; PyTorch's own
CompositeImplicitAutograd decomposition unrolls them over the sequence into the cell's
``addmm``, ``sigmoid``, ``tanh``, ``mul`` and ``add`` per time step and layer, which we lower
(and which get an observer each in INT, as any other op)."""

from __future__ import annotations

import contextlib

import torch

from ._common import arg, decomposition
from .composite import splice_decomposition

aten = torch.ops.aten

#: the recurrent layers on a padded (not packed) sequence
RECURRENT_OPS = (aten.gru.input, aten.lstm.input, aten.rnn_tanh.input, aten.rnn_relu.input)
#: one time step of a recurrent layer (``nn.LSTMCell``, ``nn.GRUCell``, ``nn.RNNCell``)
CELL_OPS = (aten.lstm_cell.default, aten.gru_cell.default, aten.rnn_tanh_cell.default,
            aten.rnn_relu_cell.default)


@decomposition(*RECURRENT_OPS)
def recurrent(gm, n, b):
    """Unroll the layer through PyTorch's implicit decomposition, traced with oneDNN off (on
    the CPU the LSTM one otherwise calls the fused ``mkldnn_rnn_layer``). Training-mode
    dropout between layers is random: that layer stays on the CPU."""
    train, dropout = arg(n, 6, "train"), arg(n, 5, "dropout")
    if train and dropout:
        return None
    with _onednn_off():
        return splice_decomposition(gm, n, b, n.target.decompose)


@decomposition(*CELL_OPS)
def recurrent_cell(gm, n, b):
    """One step of a recurrent cell, through PyTorch's decomposition of it (linear layers,
    gates of sigmoid and tanh)."""
    with _onednn_off():
        return splice_decomposition(gm, n, b, n.target.decompose)


@contextlib.contextmanager
def _onednn_off():
    # only the enabled flag: torch.backends.mkldnn.flags() also sets allow_tf32, which warns
    # "TF32 acceleration ... Intel GPUs" on every CPU build
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(was)
