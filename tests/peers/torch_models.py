"""The zoo's CPU-sized models as PyTorch modules, for timing PyTorch's
training step beside trainsim's (tests/gpu/gpu_check.py on a GPU,
tests/bench/peer_bench.py on this machine's CPU). Each matches the zoo entry
layer for layer; the scripts check the trainable parameter count against
`trainsim zoo show --json` before they time anything."""

import math

import torch
from torch import nn


def fmnist_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def fmnist_cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


class BasicBlock(nn.Module):
    """He et al. 2015's basic block with a projection shortcut (1x1 conv and
    batch norm) where the shape changes, as the zoo builds it."""

    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + shortcut)


def fmnist_resnet20():
    layers = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    inputs = 16
    for outputs, stride in ((16, 1), (32, 2), (64, 2)):
        for block in range(3):
            layers.append(BasicBlock(inputs, outputs, stride if block == 0 else 1))
            inputs = outputs
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


class DecoderBlock(nn.Module):
    """GPT-2's pre-norm block: x + attention(LN(x)) with a causal mask, then
    x + MLP(LN(x)), the MLP 4x wide with exact GELU."""

    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, mask):
        normed = self.ln1(x)
        x = x + self.attn(normed, normed, normed, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class FortunesGpt(nn.Module):
    """fortunes-gpt: byte embedding plus the sinusoidal position encoding, two
    blocks of width 128 and 4 heads over 64 bytes, final LN, a 256-way head."""

    def __init__(self, context=64, width=128, heads=4, blocks=2, vocabulary=256):
        super().__init__()
        self.tok = nn.Embedding(vocabulary, width)
        position = torch.arange(context).unsqueeze(1)
        rate = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
        encoding = torch.zeros(context, width)
        encoding[:, 0::2] = torch.sin(position * rate)
        encoding[:, 1::2] = torch.cos(position * rate)
        self.register_buffer("pos", encoding)
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), diagonal=1))
        self.blocks = nn.ModuleList(DecoderBlock(width, heads) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.ln_f(x))


class FortunesLstm(nn.Module):
    """fortunes-lstm: byte embedding, two LSTMs of 128 with a residual around
    the second, a 256-way head at every position. The zoo's LSTM has one bias
    vector (TensorFlow's form), PyTorch's two: the second is held at zero and
    frozen, so the trainable parameters agree."""

    def __init__(self, width=128, vocabulary=256):
        super().__init__()
        self.tok = nn.Embedding(vocabulary, width)
        self.lstm1 = nn.LSTM(width, width, batch_first=True)
        self.lstm2 = nn.LSTM(width, width, batch_first=True)
        for lstm in (self.lstm1, self.lstm2):
            nn.init.zeros_(lstm.bias_hh_l0)
            lstm.bias_hh_l0.requires_grad_(False)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        first = self.lstm1(self.tok(tokens))[0]
        return self.head(first + self.lstm2(first)[0])


MODELS = {"fmnist-mlp": fmnist_mlp, "fmnist-cnn": fmnist_cnn, "fmnist-resnet20": fmnist_resnet20,
          "fortunes-gpt": FortunesGpt, "fortunes-lstm": FortunesLstm}


def trainable_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
