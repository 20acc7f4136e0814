"""Channel servers: as claude registers them (registry, pure) and as they run (running)."""
