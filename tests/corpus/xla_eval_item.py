"""Train, then an eval loop that accumulates the loss with `.item()` in the middle of each eval step: the pending
graph runs at the .item(), and the rest of the step is a second graph. Planted mistake: the .item() (keep a device
accumulator and read it once after the loop).

Issue 9, failure 5 (a graph break nobody reports).
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm


def main(train_steps=10, eval_steps=6, batch_size=16):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 48), nn.Tanh(), nn.Linear(48, 3)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    xs, ys = torch.randn(train_steps * batch_size, 24), torch.randint(0, 3, (train_steps * batch_size,))
    for i in range(train_steps):
        x = xs[i * batch_size:(i + 1) * batch_size].to(device)
        y = ys[i * batch_size:(i + 1) * batch_size].to(device)
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        xm.mark_step()

    model.eval()
    total_loss, correct = 0.0, torch.zeros((), device=device)
    with torch.no_grad():
        for i in range(eval_steps):
            x = torch.randn(batch_size, 24).to(device)
            y = torch.randint(0, 3, (batch_size,)).to(device)
            logits = model(x)
            total_loss += criterion(logits, y).item()  # PLANTED: graph_break
            correct += (logits.softmax(-1).argmax(-1) == y).sum()
            xm.mark_step()
    print(f"eval loss {total_loss / eval_steps:.3f} acc {correct.item() / (eval_steps * batch_size):.3f}")


if __name__ == "__main__":
    main()
