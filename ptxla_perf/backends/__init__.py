"""Backend adapters: each turns one runtime's signals into backend-neutral StepRecords."""
