"""Codex CLI rollouts: the sibling of the Claude Code engine for ``$CODEX_HOME/sessions``.

``rules`` holds the speech allowlist and the noise categories as data; ``rollout`` reads a
rollout (inlining fork/revision parents) and classifies every line, ``prefilter`` being its
fast path from a typed decode; ``candidate`` lays out
and writes the rebuilt rollout; ``verify`` re-reads it. ``runtime.agents.detect`` picks this package
or the Claude one for a file.
"""
