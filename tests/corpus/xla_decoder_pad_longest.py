"""A tiny GPT-style decoder trained on variable-length text; the collate function pads each batch to its longest
sequence, so nearly every batch has a new sequence length and torch_xla compiles a new graph for it.
Planted mistake: dynamic padding (pad to a fixed max_length / a few buckets instead).

Issue 9, failure 3 (recompiles after warm-up explained with a cause borrowed from another step).
"""
import math

import torch
import torch.nn as nn
import torch_xla

VOCAB, PAD = 64, 0


class Block(nn.Module):
    """Pre-norm single-head causal self-attention (no MLP: kept tiny so each compile is cheap on a CPU)."""
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x, mask):
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        att = (q @ k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(mask, -1e4).softmax(-1)
        return x + self.proj(att @ v)


class TinyDecoder(nn.Module):
    def __init__(self, d=16, layers=1, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, VOCAB)

    def forward(self, ids):
        t = ids.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=ids.device), 1)
        mask = causal[None] | (ids == PAD)[:, None, :]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(x)


def synthetic_corpus(n, rng):
    lengths = torch.randint(6, 40, (n,), generator=rng)
    return [torch.randint(1, VOCAB, (int(l),), generator=rng) for l in lengths]


def collate(samples):
    longest = max(len(s) for s in samples)
    batch = torch.full((len(samples), longest), PAD, dtype=torch.long)  # ALSO-LINE: recompilation
    for i, s in enumerate(samples):
        batch[i, :len(s)] = s
    return batch


def main(steps=8, batch_size=4):
    rng = torch.Generator().manual_seed(5)
    device = torch_xla.device()
    model = TinyDecoder().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = torch.utils.data.DataLoader(synthetic_corpus(steps * batch_size, rng), batch_size=batch_size,
                                         collate_fn=collate)
    model.train()
    for step, ids in enumerate(loader):
        ids = ids.to(device)  # PLANTED: recompilation
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_xla.sync()
    print(f"final loss {loss.item():.3f} (ppl {math.exp(loss.item()):.1f})")


if __name__ == "__main__":
    main()
