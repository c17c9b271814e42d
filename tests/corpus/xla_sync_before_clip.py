"""A regression loop that syncs right after `loss.backward()` "so the gradients exist" before clipping them,
then clips, steps the optimizer and syncs again: every iteration runs as two graphs (forward+backward, then
clip+update) instead of one. Planted mistake: the sync between backward and the optimizer step.
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm


class Regressor(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.body(x))


def main(epochs=2, batch_size=16, batches=6):
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Regressor().to(device)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    features = torch.randn(batches * batch_size, 12)
    labels = features[:, :3].sum(dim=1, keepdim=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(features, labels), batch_size=batch_size)
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            xm.mark_step()  # PLANTED: graph_break
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            xm.mark_step()
        print(f"epoch {epoch} done")


if __name__ == "__main__":
    main()
