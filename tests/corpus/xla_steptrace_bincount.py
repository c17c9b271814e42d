"""Class-balanced loss with the class weights recomputed per batch by `torch.bincount`, inside an `xp.StepTrace`
loop. bincount has no XLA lowering: it falls back to the CPU (device->host copy, CPU op, copy back) every step.
Planted mistake: the per-batch bincount (compute the class weights once from the dataset, or use one_hot().sum(0)).
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.debug.profiler as xp

NUM_CLASSES = 5


def main(steps=10, batch_size=32):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        with xp.StepTrace("train", step_num=step):
            x = torch.randn(batch_size, 10).to(device)
            y = torch.randint(0, NUM_CLASSES, (batch_size,)).to(device)
            counts = torch.bincount(y, minlength=NUM_CLASSES).float()  # PLANTED: op_fallback
            weights = counts.sum() / (NUM_CLASSES * counts.clamp(min=1))
            loss = nn.functional.cross_entropy(model(x), y, weight=weights)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
