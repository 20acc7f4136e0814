"""The read-only stage: manifest, config, door, binary, workdir, doctor, plan and dirty."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from provision.accept.checklist import Checklist, Scene
    from runtime.config import Config


def readonly_stage(scene: Scene, out: Checklist) -> None:
    """Project dir, transcripts, door, binary, workdir, source session, plan and dirty."""
    from runtime.paths import encode_project_dir, is_session_file, latest_transcript

    out.stage = "readonly"
    config = scene.config
    if config is None:  # every line needs it: each is recorded skip naming the config line
        for name in _NEEDS_CONFIG:
            out.cannot_judge(name, "no runtime config")
        return
    if config.project_dir is None:
        out.add("project dir exists", False, "no runtime config / project_dir")
        return
    project = config.project_dir
    out.add("project dir exists", project.is_dir(), str(project))
    sessions = [p for p in project.glob("*.jsonl") if is_session_file(p)] \
        if project.is_dir() else []
    out.add("transcripts > 0", bool(sessions), {"count": len(sessions)})
    agent_lines(scene, out)
    workdir = str(config.workdir) if config.workdir else ""
    encoded = encode_project_dir(workdir) if workdir else ""
    out.add("workdir matches project dir", bool(workdir) and project.name == encoded
            and project.parent.name == "projects",
            {"workdir": workdir, "encoded": encoded, "project_dir": str(project)})
    newest = latest_transcript(project) if project.is_dir() else None
    out.add("source session id non-empty", bool(newest and newest.stem),
            {"transcript": str(newest) if newest else None,
             "session_id": newest.stem if newest else ""})
    with out.guard("doctor"):
        from runtime.switch.ops import doctor

        report = doctor(config)
        bad = {k: v for k, v in report["checks"].items() if not v["ok"]}
        out.add("doctor", not bad, bad or "every doctor check ok")
    if newest is None:
        for name in ("nothing blocked", "selected turns = source turns", "nothing dropped",
                     "noise ratio plausible"):
            out.add(name, False, "no source transcript")
        return
    with out.guard("nothing blocked"):
        _plan_lines(config, out)


_NEEDS_CONFIG = ("project dir exists", "transcripts > 0", "door target alive",
                 "claude binary absolute", "workdir matches project dir",
                 "source session id non-empty", "doctor", "nothing blocked",
                 "selected turns = source turns", "nothing dropped", "noise ratio plausible")


def binary_line(scene: Scene, out: Checklist, name: str) -> None:
    """``name``: the resume argv starts with an absolute path to an executable file."""
    assert scene.config is not None
    argv = scene.config.switch.resume_argv
    binary = argv[0] if argv else ""
    st = scene.host.stat(binary) if binary.startswith("/") else None
    out.add(name, bool(st and st.executable and not st.is_dir),
            {"resume_argv[0]": binary,
             "manifest": scene.manifest.binary if scene.manifest else None})


def agent_lines(scene: Scene, out: Checklist) -> None:
    """The lines every agent's read-only stage has, named after the profile's agent: its user
    owns what was installed, the door's target is alive, its binary is absolute."""
    agent = scene.profile.agent
    with out.guard(f"installed paths belong to the {agent} user"):
        _ownership(scene, out)
    with out.guard("door target alive"):
        _door_alive(scene, out)
    binary_line(scene, out, f"{agent} binary absolute")


def _ownership(scene: Scene, out: Checklist) -> None:
    """The hook and the worker run as the agent's user: they must own the state dir (and all in
    it), the pointer dir and the config (0700/0600), or the first switch fails to write."""
    from provision.result import Context
    from provision.tasks.files import ownership_problems

    problems = ownership_problems(scene.host, Context(scene.profile, check=True))
    out.add(f"installed paths belong to the {scene.profile.agent} user", not problems,
            problems or {"user": scene.profile.claude.user,
                         "state_dir": scene.profile.install.state_dir,
                         "config": scene.profile.install.config_path})


def _door_alive(scene: Scene, out: Checklist) -> None:
    from runtime.doors.base import open_door
    from runtime.procfs import alive, cmdline

    assert scene.config is not None
    door = open_door(scene.config)
    identity = door.identity()
    pid = door.process_pid(identity)
    if door.name.identity_is_session:
        project = scene.config.project_dir
        found = bool(project and (project / f"{identity}.jsonl").is_file())
        out.add("door target alive", found, {"door": door.name, "session": identity})
        return
    argv = cmdline(pid) if pid else None
    out.add("door target alive", bool(pid and alive(pid)),
            {"door": door.name, "identity": identity, "pid": pid,
             "argv": list(argv) if argv else None})


def _plan_lines(config: Config, out: Checklist, source: Path | None = None) -> None:
    """What a rebuild of ``source`` (default: the newest transcript) would carry."""
    from runtime.engine.report import plan_report

    plan = plan_report(source, config)
    turns = plan["turns"]
    out.add("nothing blocked", plan["blocked_reason"] is None,
            plan["blocked_reason"] or {"transcript": plan["transcript"]})
    out.add("selected turns = source turns", turns["selected"] == turns["source"],
            {"source": turns["source"], "selected": turns["selected"]})
    out.add("nothing dropped", not turns["dropped_oldest_turns"]
            and not turns["excluded_open_tail"],
            {"dropped_oldest_turns": turns["dropped_oldest_turns"],
             "excluded_open_tail": turns["excluded_open_tail"]})
    ratio = plan["dirty"]["noise_ratio"]
    out.add("noise ratio plausible", ratio >= 0.5,
            {"noise_ratio": ratio, "noise_bytes": plan["dirty"]["noise_bytes"]})
