"""The rebuild engine (pure of the machine: a session file in, a candidate file out).

transcript (streaming reader, prefilter) → classify/speech (the allowlist of what was said) →
turns → items → candidate (the new session file) → verify; dirty (the noise ledger), tokens,
report (plan/dirty), audit (an independent second reading). codex/ is the same for Codex rollouts.
"""
