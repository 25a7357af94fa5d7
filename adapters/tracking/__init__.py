"""MLflow adapters: evaluation, reflection, skill, structure and AEL runs, the registry."""
