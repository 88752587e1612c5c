"""Duration predictors: pure functions of job history (no Slurm, no database imports)."""
