"""A Hugging Face Trainer-style loop: tqdm progress bar, AdamW with weight-decay groups, a linear warm-up/decay
LambdaLR scheduler stepped every update, gradient clipping, xm.optimizer_step. Clean.
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
from torch.optim.lr_scheduler import LambdaLR
from tqdm.auto import tqdm


class TextClassifier(nn.Module):
    def __init__(self, vocab=128, d=32, labels=3):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, d)
        self.LayerNorm = nn.LayerNorm(d)
        self.dense = nn.Linear(d, d)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(d, labels)

    def forward(self, input_ids, attention_mask, labels=None):
        h = self.dropout(torch.tanh(self.dense(self.LayerNorm(self.embeddings(input_ids)))))
        pooled = (h * attention_mask[..., None]).sum(1) / attention_mask.sum(1, keepdim=True)
        logits = self.classifier(pooled)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return loss, logits


def linear_schedule_with_warmup(optimizer, warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.05, (total - step) / max(1, total - warmup))
    return LambdaLR(optimizer, factor)


def make_dataset(n, seq_len=24, vocab=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (n, seq_len), generator=g)
    lengths = torch.randint(8, seq_len + 1, (n,), generator=g)
    mask = (torch.arange(seq_len)[None] < lengths[:, None]).long()
    return torch.utils.data.TensorDataset(ids * mask, mask, torch.randint(0, 3, (n,), generator=g))


def main(num_train_steps=16, batch_size=8, max_grad_norm=1.0):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = TextClassifier().to(device)
    no_decay = ["bias", "LayerNorm.weight", "norm"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(grouped, lr=5e-4)
    scheduler = linear_schedule_with_warmup(optimizer, warmup=3, total=num_train_steps)
    dataloader = torch.utils.data.DataLoader(make_dataset(num_train_steps * batch_size), batch_size=batch_size,
                                             shuffle=True, drop_last=True)
    model.train()
    progress = tqdm(dataloader, desc="train", mininterval=5.0)
    for step, batch in enumerate(progress):
        input_ids, attention_mask, labels = (t.to(device) for t in batch)
        loss, _ = model(input_ids, attention_mask, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        xm.optimizer_step(optimizer, barrier=True)
        scheduler.step()
        optimizer.zero_grad()
    progress.close()
    print("final lr", scheduler.get_last_lr()[0])


if __name__ == "__main__":
    main()
