"""The same kind of HF-style loop as xla_hf_tqdm_scheduler.py, but the progress bar shows the loss through
`pbar.set_postfix(loss=loss.item())` on every step: a device-to-host sync each iteration that stalls the host
until the step finishes. Planted mistake: the per-step .item().
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
from tqdm import tqdm


def main(epochs=1, steps=16, batch_size=16):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps * epochs)
    data = torch.utils.data.TensorDataset(torch.randn(steps * batch_size, 32), torch.randint(0, 10, (steps * batch_size,)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=True)
    for epoch in range(epochs):
        pbar = tqdm(loader, desc=f"epoch {epoch}", mininterval=5.0)
        for x, y in pbar:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            xm.mark_step()
            pbar.set_postfix(loss=loss.item())  # PLANTED: device_to_host_sync


if __name__ == "__main__":
    main()
