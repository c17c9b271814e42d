"""A synthetic MMF dataset shaped like Hateful Memes with region features, batched by MMF's collator."""

from __future__ import annotations

import torch
from mmf.common.batch_collator import BatchCollator
from mmf.common.sample import Sample
from mmf.datasets.base_dataset import BaseDataset
from omegaconf import DictConfig

DATASET_NAME = "ptxla_synthetic"


class SyntheticMMBTDataset(BaseDataset):
    """Samples with ``input_ids``, ``input_mask``, ``segment_ids``, ``image_feature_0`` (regions x
    feature size) and multi-label ``targets``.  Deterministic per index; the device the batch is
    moved to comes from MMF's registry (``current_device``), as in MMF's own datasets."""

    def __init__(self, cfg: DictConfig, dataset_type: str = "train", num_samples: int | None = None):
        super().__init__(DATASET_NAME, cfg.data, dataset_type)
        d, m = cfg.data, cfg.model
        self.num_samples = int(num_samples if num_samples is not None else d.train_samples)
        self.tokens = int(d.tokens)
        self.regions = int(d.regions)
        self.feature_dim = int(m.modal_hidden_size)
        self.vocab_size = int(m.vocab_size)
        self.num_labels = int(m.num_labels)
        self.seed = int(cfg.get("seed", 0)) * 1_000_003 + (0 if dataset_type == "train" else 500_009)

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, idx: int) -> Sample:
        g = torch.Generator().manual_seed(self.seed + int(idx))
        n_text = int(torch.randint(max(2, self.tokens // 2), self.tokens + 1, (1,), generator=g))
        input_ids = torch.zeros(self.tokens, dtype=torch.long)
        input_ids[:n_text] = torch.randint(1, self.vocab_size, (n_text,), generator=g)
        input_mask = torch.zeros(self.tokens, dtype=torch.long)
        input_mask[:n_text] = 1
        sample = Sample()
        sample.id = torch.tensor(int(idx), dtype=torch.long)
        sample.input_ids = input_ids
        sample.input_mask = input_mask
        sample.segment_ids = torch.zeros(self.tokens, dtype=torch.long)
        sample.image_feature_0 = torch.randn(self.regions, self.feature_dim, generator=g)
        sample.targets = (torch.rand(self.num_labels, generator=g) < 0.5).float()
        return sample


def make_loader(dataset: SyntheticMMBTDataset, batch_size: int, drop_last: bool, num_workers: int = 0):
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        drop_last=drop_last,
        num_workers=num_workers,
        collate_fn=BatchCollator(dataset.dataset_name, dataset.dataset_type),
    )
