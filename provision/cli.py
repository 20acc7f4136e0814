"""The ``tl-provision`` command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: tl-provision {apply,drift,accept,introspect} HOST.yml [options]

  introspect HOST.yml   show how claude is really launched and the resume argv (changes nothing)
  apply HOST.yml        install: config, Stop hook, MCP server, verification (--check, --diff)
  drift HOST.yml        compare the machine with the last apply (exit 0 clean, 1 drift)
  accept HOST.yml       post-install acceptance checklist (--drill, --live --confirm REBUILD)
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Print usage (the installer lands with the provision issue)."""
    args = list(sys.argv[1:] if argv is None else argv)
    print(USAGE, end="", file=sys.stdout if args[:1] in ([], ["-h"], ["--help"]) else sys.stderr)
    return 0 if args[:1] in ([], ["-h"], ["--help"]) else 2
