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


MODELS = {"fmnist-mlp": fmnist_mlp, "fmnist-cnn": fmnist_cnn, "fmnist-resnet20": fmnist_resnet20}
