"""Host-side output of a run, one module per job:

- `sinks`: where metrics go: `metrics.jsonl` lines (`metrics_rows`, `MetricsLog`,
  `keep_rows_until`), `summary.json` (`write_summary`), TensorBoard and W&B
  (`TensorBoardSink`, `WandbSink`, `import_libraries`), and the number and key formats
  (`json_number`, `eval_key`, `scalar_order`).
- `history`: what the host keeps of a run (`RunHistory`) and its final returns
  (`final_returns`).
- `progress`: the console's line per update (`progress_line`) and tqdm bar (`ProgressBar`).
- `plots`: the learning curve and a PBT run's hyperparameters as PNGs (`plot_learning_curve`,
  `plot_pbt`).

matplotlib, tensorboardX, wandb and tqdm are imported when they are used, not with the package.
"""
