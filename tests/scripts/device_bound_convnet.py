"""An MNIST-style convnet on torch_xla whose step is mostly the device's: one fixed batch kept on the device, a
wide convolution, SGD with momentum, and torch_xla.sync() each step - the host traces a small graph and the sync
waits for the previous step's graph. argv 1: steps (default 24); argv 2: channels (default 48)."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 24
width = int(sys.argv[2]) if len(sys.argv) > 2 else 48


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 5, padding=2)
        self.conv2 = nn.Conv2d(width, width, 5, padding=2)
        self.fc = nn.Linear(width * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)


device = torch_xla.device()
torch.manual_seed(0)
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
images = torch.randn(64, 1, 28, 28).to(device)
labels = torch.randint(0, 10, (64,)).to(device)
model.train()
for step in range(steps):
    optimizer.zero_grad()
    loss = F.nll_loss(model(images), labels)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print(f"loss {loss.item():.4f}")
