"""torch.compile training in the style of torch_xla's dynamo guide: the whole step compiled with the openxla
backend and called once per batch from a DataLoader loop, with no torch_xla.sync() anywhere in the loop."""
import torch
import torch_xla
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
loader = DataLoader(TensorDataset(torch.randn(96, 16), torch.randint(0, 4, (96,))), batch_size=8)


def train_step(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


compiled_step = torch.compile(train_step, backend="openxla")
for epoch in range(1):
    for x, y in loader:
        loss = compiled_step(x.to(device), y.to(device))
print(f"batches {len(loader)} loss {loss.item():.4f}")
