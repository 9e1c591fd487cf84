"""Top-level shims for the old import names (installed as `generation`, `understanding`, `demos` for one release)."""
