"""A Hugging-Face-style causal LM fine-tuning loop on torch_xla: a tiny GPT-style model called with a dict batch,
a running loss kept on the device, AdamW with weight decay on some parameters, a linear warm-up then linear decay schedule whose rate is exactly 0.0 at the start and again at
the end, loss.backward / clip / optimizer.step / scheduler.step / zero_grad, and xm.mark_step each update.
argv 1: updates (default 10). With PTXLA_TEST_COMPILES=path, writes the UncachedCompile count after each update
(one line per update) - a plain run's compiles per iteration, to compare with a profiled one."""
import math
import os
import sys

import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

updates = int(sys.argv[1]) if len(sys.argv) > 1 else 10
warmup = 2
vocab, width, context, batch = 64, 32, 16, 4


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP, as GPT-style models write it (masked with a registered buffer)."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.drop = nn.Dropout(0.1)
        self.register_buffer("causal", torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def forward(self, h):
        b, t, _ = h.shape
        q, k, v = (x.view(b, t, 2, width // 2).transpose(1, 2) for x in self.qkv(self.ln1(h)).split(width, dim=2))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(width // 2)
        scores = scores.masked_fill(~self.causal[:t, :t], torch.finfo(scores.dtype).min)
        h = h + self.proj(self.drop(scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, width))
        return h + self.mlp(self.ln2(h))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.block = Block()
        self.norm = nn.LayerNorm(width)

    def forward(self, input_ids, labels=None):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        logits = self.norm(self.block(self.embed(input_ids) + self.pos(positions))) @ self.embed.weight.T
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1))
        return {"loss": loss, "logits": logits}


def lr_lambda(update):  # linear warm-up from 0, then linear decay to 0 at the last update
    if update < warmup:
        return update / warmup
    return max(0.0, (updates - 1 - update) / max(1, updates - 1 - warmup))


device = xm.xla_device()
torch.manual_seed(0)
model = TinyLM().to(device)
decay = [p for n, p in model.named_parameters() if not n.endswith("bias") and "norm" not in n]
no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "norm" in n]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                               {"params": no_decay, "weight_decay": 0.0}], lr=5e-4)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
corpus = torch.randint(0, vocab, (updates * batch, context))
counts = []
tr_loss = torch.zeros((), device=device)
model.train()
for update in range(updates):
    inputs = {"input_ids": corpus[update * batch:(update + 1) * batch]}
    inputs = {k: v.to(device) for k, v in inputs.items()}
    loss = model(**inputs, labels=inputs["input_ids"])["loss"]
    loss.backward()
    tr_loss += loss.detach()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    xm.mark_step()
    counts.append(met.counter_value("UncachedCompile") or 0)
print(f"mean loss {tr_loss.item() / updates:.4f} lr {scheduler.get_last_lr()[0]:.2e}")
if os.environ.get("PTXLA_TEST_COMPILES"):
    with open(os.environ["PTXLA_TEST_COMPILES"], "w") as f:
        f.write("\n".join(map(str, counts)) + "\n")
