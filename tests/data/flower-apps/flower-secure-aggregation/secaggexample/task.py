# ruff: noqa
# Flower's example app, from github.com/adap/flower, examples/flower-secure-aggregation/secaggexample/task.py at fdef7afb1d (Apache-2.0): unchanged but for its data loader, load_data (scikit-learn's bundled digits, see below)
# (tests/data/flower-apps/README.md).
"""secaggexample: A Flower with SecAgg+ app."""

import random
from collections import OrderedDict
from unittest.mock import Mock

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader


class Net(nn.Module):
    """Model (simple CNN adapted from 'PyTorch: A 60 Minute Blitz')"""

    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def make_net(seed=42):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return Net()


def get_weights(net):
    return [val.cpu().numpy() for _, val in net.state_dict().items()]


def set_weights(net, parameters):
    params_dict = zip(net.state_dict().keys(), parameters)
    state_dict = OrderedDict({k: torch.tensor(v) for k, v in params_dict})
    net.load_state_dict(state_dict, strict=True)


fds = None  # Cache FederatedDataset


def load_data(partition_id: int, num_partitions: int, batch_size: int, is_demo: bool):
    """Load partition CIFAR10 data."""
    if is_demo:
        trainloader, testloader = Mock(dataset=[0]), Mock(dataset=[0])
        return trainloader, testloader
    train_set, test_set = _partition(partition_id, num_partitions)
    trainloader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
    testloader = DataLoader(test_set, batch_size=batch_size)
    return trainloader, testloader


def train(net, trainloader, valloader, epochs, learning_rate, device):
    """Train the model on the training set."""
    net.to(device)  # move model to GPU if available
    criterion = torch.nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=learning_rate, momentum=0.9)
    net.train()
    for _ in range(epochs):
        for batch in trainloader:
            images = batch["img"]
            labels = batch["label"]
            optimizer.zero_grad()
            criterion(net(images.to(device)), labels.to(device)).backward()
            optimizer.step()

    val_loss, val_acc = test(net, valloader, device)

    results = {
        "val_loss": val_loss,
        "val_accuracy": val_acc,
    }
    return results


def test(net, testloader, device):
    """Validate the model on the test set."""
    net.to(device)  # move model to GPU if available
    criterion = torch.nn.CrossEntropyLoss()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for batch in testloader:
            images = batch["img"].to(device)
            labels = batch["label"].to(device)
            outputs = net(images)
            loss += criterion(outputs, labels).item()
            correct += (torch.max(outputs.data, 1)[1] == labels).sum().item()
    accuracy = correct / len(testloader.dataset)
    loss = loss / len(testloader)
    return loss, accuracy


# netsim's test copy: the data loader below replaces the original's (which downloads uoft-cs/cifar10
# with flwr_datasets' FederatedDataset and converts it with torchvision's transforms) by
# scikit-learn's bundled digits (1,797 8x8 images, nothing downloaded), scaled up to the
# original's image shape (3 x 32 x 32) and normalized as the original normalizes, split IID into
# the partitions (as IidPartitioner) and 80/20 into train and test (as the original).
import numpy as np
from sklearn.datasets import load_digits


class _Digits(torch.utils.data.Dataset):
    """Images (3 x 32 x 32) and labels as the original's batches hold them."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, k):
        return {"img": self.images[k], "label": int(self.labels[k])}


def _partition(partition_id: int, num_partitions: int):
    global fds
    if fds is None:
        x, y = load_digits(return_X_y=True)
        images = np.kron(x.reshape(-1, 1, 8, 8) / 16.0, np.ones((1, 1, 4, 4)))
        images = np.pad(images, ((0, 0), (0, 0), (0, 0), (0, 0)))
        images = np.repeat(images, 3, axis=1)
        images = torch.tensor((images - 0.5) / 0.5, dtype=torch.float32)
        order = np.random.default_rng(42).permutation(len(y))
        fds = (images, y, np.array_split(order, num_partitions))
    images, labels, parts = fds
    rows = np.random.default_rng(42).permutation(parts[partition_id])
    cut = int(0.8 * len(rows))
    return (_Digits(images[rows[:cut]], labels[rows[:cut]]),
            _Digits(images[rows[cut:]], labels[rows[cut:]]))
