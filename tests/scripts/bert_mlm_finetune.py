"""A BERT masked-LM fine-tuning loop as transformers 2.3's `run_lm_finetuning.py` writes it, ported to torch_xla
the way that release's `run_glue.py --tpu` path does: tokens masked on the CPU every batch (80 % [MASK], 10 %
random, 10 % kept, special tokens never masked), `.to(device)`, `tr_loss += loss.item()` every step,
`clip_grad_norm_`, `xm.optimizer_step(optimizer, barrier=True)`, transformers' own AdamW with a linear schedule that
reaches 0.0 on the last update, `model.zero_grad()`. A tiny 2-layer BertConfig.
argv: updates (default 8), block size (default 32). With PTXLA_TEST_COMPILES=path, writes the UncachedCompile count
after each update (one line per update): a plain run's compiles per iteration, to compare with a profiled one."""
import os
import sys

import torch
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch.utils.data import DataLoader, RandomSampler, TensorDataset
from transformers import AdamW, BertConfig, BertForMaskedLM, get_linear_schedule_with_warmup

updates = int(sys.argv[1]) if len(sys.argv) > 1 else 8
block = int(sys.argv[2]) if len(sys.argv) > 2 else 32
batch_size, vocab = 16, 512
CLS, SEP, MASK = 1, 2, 3  # the special tokens (a tokenizer's [CLS], [SEP], [MASK])


def mask_tokens(inputs: torch.Tensor, mlm_probability: float = 0.15):
    """Masked-LM inputs and labels on the CPU (BERT's 80/10/10 recipe); labels -100 where nothing was masked."""
    labels = inputs.clone()
    probability = torch.full(labels.shape, mlm_probability)
    special = (labels == CLS) | (labels == SEP)
    probability.masked_fill_(special, value=0.0)
    masked = torch.bernoulli(probability).bool()
    labels[~masked] = -100
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked
    inputs[replaced] = MASK
    randomized = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked & ~replaced
    inputs[randomized] = torch.randint(vocab, labels.shape, dtype=torch.long)[randomized]
    return inputs, labels


torch.manual_seed(0)
device = xm.xla_device()
config = BertConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=128, max_position_embeddings=block)
model = BertForMaskedLM(config).to(device)
tokens = torch.randint(4, vocab, (updates * batch_size, block))
tokens[:, 0], tokens[:, -1] = CLS, SEP
loader = DataLoader(TensorDataset(tokens), sampler=RandomSampler(tokens), batch_size=batch_size)

no_decay = ["bias", "LayerNorm.weight"]
groups = [{"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
           "weight_decay": 0.01},
          {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
           "weight_decay": 0.0}]
optimizer = AdamW(groups, lr=5e-5, eps=1e-8)
# the rate falls to exactly 0.0 on the last update (a special scalar in the graph: one compile more there)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=updates - 1)

counts = []
tr_loss, global_step = 0.0, 0
model.zero_grad()
model.train()
for step, (batch,) in enumerate(loader):
    inputs, labels = mask_tokens(batch)
    inputs = inputs.to(device)
    labels = labels.to(device)
    outputs = model(inputs, masked_lm_labels=labels)
    loss = outputs[0]
    loss.backward()
    tr_loss += loss.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    xm.optimizer_step(optimizer, barrier=True)
    scheduler.step()
    model.zero_grad()
    global_step += 1
    counts.append(met.counter_value("UncachedCompile") or 0)
print(f"global_step {global_step} average loss {tr_loss / global_step:.4f}")
if os.environ.get("PTXLA_TEST_COMPILES"):
    with open(os.environ["PTXLA_TEST_COMPILES"], "w") as f:
        f.write("\n".join(map(str, counts)) + "\n")
