"""What a run stores and reads back: checkpoints and their record, restoring a run, a trained
policy (`purerl.load`) and its export, failed writes."""
