"""The commands of the public API, one module each: sign, find, estimate, plan, info."""
