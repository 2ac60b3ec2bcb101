"""Python extensions: modules with `def extension(tempi): ...` that add tools and react to a
session's events, as pi's extensions do. `models` holds what crosses workflow history
(names, schemas, outcomes, never code); the rest runs on workers only."""
