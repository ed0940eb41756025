"""Training: Trainer pieces (token batches, label smoothing, time budget), checkpoints, the run's record."""
