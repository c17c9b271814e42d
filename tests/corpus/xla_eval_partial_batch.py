"""Train a small classifier, then evaluate after each epoch with drop_last=False: the eval set's last batch is
smaller, so the eval graph is compiled once more for it (in the first epoch only: cached after that). Clean.

Issue 9, failure 3 (MMF's eval pass with a smaller last batch: a cause nobody can act on).
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :5].sum(1) > 0).long()
    return torch.utils.data.TensorDataset(x, y)


def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros((), device=device)
    seen = 0
    with torch.no_grad():
        for x, y in loader:  # INFO: recompilation
            correct += (model(x).argmax(-1) == y).sum()  # ALSO-LINE: recompilation
            seen += y.shape[0]
    return correct, seen


def main(epochs=2, batch_size=16):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train = torch.utils.data.DataLoader(make_split(8 * batch_size, 0), batch_size=batch_size, shuffle=True,
                                        drop_last=True)
    val = torch.utils.data.DataLoader(make_split(3 * batch_size + 5, 1), batch_size=batch_size, drop_last=False)
    train_loader, val_loader = pl.MpDeviceLoader(train, device), pl.MpDeviceLoader(val, device)
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            xm.optimizer_step(optimizer)
        correct, seen = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: val acc {correct.item() / seen:.3f}")


if __name__ == "__main__":
    main()
