"""``tl-provision accept HOST.yml``: the post-install acceptance checklist (SPEC §5.4).

Every line is ``pass`` / ``fail`` / ``skip`` with its evidence. Stages:

- ``readonly`` — the manifest and the rendered runtime config, ``tl-rebuild doctor``/``plan``/
  ``dirty`` expectations: project dir, transcripts, door target, claude binary, workdir ↔
  project dir, source session, nothing blocked / dropped, noise ratio.
- ``wiring`` — the Stop hook exactly as settings.json holds it, run with a synthetic payload
  (exits 0 within its timeout, schedules nothing), the MCP server's 7 tools over stdio, resume
  argv ≡ launch argv except the session token, channel flags kept, ``server:NAME`` channels
  registered, the hook still there after a pause.
- ``drill`` (drill.py, scratch.py) and ``live`` (live.py).

A Codex host (``agent: codex``) has its own read-only and wiring lines (codex.py: config.toml's
notify head and MCP table, ``codex mcp list``, the pane's thread, own-server launch) and drill
(codex_drill.py: a scratch CODEX_HOME, a loopback model stand-in, a real scratch codex in a
private tmux); ``--live`` is not built for it.

Layout: checklist.py (lines, scene) → readonly.py → wiring.py → drill.py / scratch.py →
live.py; hints.py says what to do when a line fails; process.py finds the live claude.

Exit code: 0 every line passed (skips allowed), 1 a line failed; usage or profile errors are
raised as ProvisionError (the CLI exits 2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provision.accept.checklist import FAIL, PASS, SKIP, Checklist, Line, Scene, load_scene
from provision.accept.readonly import readonly_stage
from provision.accept.wiring import wiring_stage
from provision.errors import AcceptError
from runtime.agents.kind import AgentKind

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile

__all__ = ["FAIL", "PASS", "SKIP", "Checklist", "Line", "Scene", "cmd_accept", "run_accept"]


def run_accept(profile: Profile, host: Host, *, drill: bool = False, live: bool = False,
               confirm: str = "", wait_minutes: float = 10.0, pause: float = 2.0) -> Checklist:
    """Run the stages asked for and return the checklist (never raises for a failed line)."""
    if live and confirm != "REBUILD":
        raise AcceptError(f"accept --live needs --confirm REBUILD, got {confirm!r}; "
                          "nothing was done")
    if wait_minutes <= 0:
        raise AcceptError(f"--wait-minutes must be > 0, got {wait_minutes:g}")
    if profile.agent is AgentKind.CODEX and live:
        raise AcceptError("accept --live is not built for a codex host yet; run "
                          "'accept --drill', then a request watched by a human")
    out = Checklist(profile.host)
    scene = load_scene(profile, host, out)
    if profile.agent is AgentKind.CODEX:
        from provision.accept.codex import codex_readonly_stage, codex_wiring_stage

        codex_readonly_stage(scene, out)
        codex_wiring_stage(scene, out, pause=pause)
        if drill:
            from provision.accept.codex_drill import codex_drill_stage

            out.stage = "drill"
            codex_drill_stage(scene, out)
        return out
    readonly_stage(scene, out)
    wiring_stage(scene, out, pause=pause)
    if drill:
        from provision.accept.drill import drill_stage

        out.stage = "drill"
        drill_stage(scene, out)
    if live:
        from provision.accept.live import live_stage

        out.stage = "live"
        live_stage(scene, out, wait_minutes * 60.0)
    return out


def cmd_accept(args: Any, profile: Profile, host: Host) -> int:
    """The CLI handler: table or ``--json`` on stdout, exit 0 / 1."""
    report = run_accept(profile, host, drill=args.drill, live=args.live, confirm=args.confirm,
                        wait_minutes=args.wait_minutes)
    if args.json:
        from provision.cli import emit_json

        emit_json(report.to_dict())
    else:
        from runtime.cli.render import use_colour

        print(report.table(verbose=args.verbose, colour=use_colour()))
    return report.exit_code
