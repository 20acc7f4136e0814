"""``python -m runtime.cli``: the tl-rebuild command line."""

from runtime.cli import main

raise SystemExit(main())
