"""Language-model backends behind the extraction interface: prompts, engines, the cached client."""
