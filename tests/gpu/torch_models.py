"""The zoo's chain models as PyTorch modules, for timing PyTorch's training
step beside trainsim's GPU device (tests/gpu/gpu_check.py). Each matches the
zoo entry layer for layer; gpu_check.py checks the parameter count against
`trainsim zoo show --json` before it times anything."""

from torch import nn


def fmnist_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def fmnist_cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


MODELS = {"fmnist-mlp": fmnist_mlp, "fmnist-cnn": fmnist_cnn}
