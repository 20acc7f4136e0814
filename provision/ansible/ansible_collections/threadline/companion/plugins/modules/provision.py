"""Ansible module ``threadline.companion.provision``: run ``tl-provision`` on the managed host.

It writes the host profile (validated by ``tl-provision validate`` first), runs ``apply`` /
``drift`` / ``accept`` with ``--json`` and maps the report to Ansible's contract. The report
parsers (``apply_outcome``, ``drift_outcome``, ``accept_outcome``, ``diff_entries``) are pure.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: provision
short_description: Install, check or accept Threadline on a host with tl-provision
version_added: "0.1.0"
description:
  - Runs C(tl-provision apply --json) (or C(drift) / C(accept)) for a host profile on the managed
    host and maps its report to Ansible results.
  - C(changed) comes from the recap of C(apply); C(failed) carries the failing task's message.
  - With C(--diff), the rendered files, the settings.json Stop hook and the MCP registration
    are shown as before/after entries.
  - In check mode C(apply --check) runs and nothing on the host changes; the profile file is not
    written (the check runs against the new profile in a temporary file).
  - Restarting a running claude is never implicit (O(restart_claude)).
options:
  command:
    description:
      - C(apply) installs and verifies; C(drift) compares the host with the last apply and
        fails when anything drifted; C(accept) runs the post-install acceptance checklist
        (read-only and wiring stages; it does not run in check mode).
    type: str
    choices: [apply, drift, accept]
    default: apply
  profile_path:
    description: Absolute path of the host profile (C(host.yml)) on the managed host.
    type: path
    required: true
  profile:
    description:
      - The host profile as a mapping (the schema of C(tl-provision), see C(inventories/)).
      - When given, it is validated with C(tl-provision validate) (every error with its path)
        and written to O(profile_path) (atomically, mode 0644) when it differs.
      - When omitted, O(profile_path) must already exist.
    type: dict
  executable:
    description: The C(tl-provision) to run (absolute path, or a name looked up in PATH).
    type: path
    default: tl-provision
  restart_claude:
    description:
      - With O(command=apply), restart the live claude at the end (never implicit).
      - In check mode tl-provision only reports that it would restart.
    type: bool
    default: false
  drill:
    description: With O(command=accept), also run the full rebuild drill on a scratch target.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - Threadline maintainers
"""

EXAMPLES = r"""
- name: Install Threadline for this companion
  threadline.companion.provision:
    executable: /opt/threadline/bin/tl-provision
    profile_path: /etc/threadline/host.yml
    profile:
      host: "{{ inventory_hostname }}"
      claude: {user: claude, home: /home/claude}
      door: {kind: tmux, tmux: {target: "main:0.0"}}
      install:
        prefix: /opt/threadline
        config_path: /etc/threadline/config.toml
        state_dir: /var/lib/threadline

- name: Fail when the host drifted since the last apply
  threadline.companion.provision:
    command: drift
    executable: /opt/threadline/bin/tl-provision
    profile_path: /etc/threadline/host.yml

- name: Acceptance checklist
  threadline.companion.provision:
    command: accept
    executable: /opt/threadline/bin/tl-provision
    profile_path: /etc/threadline/host.yml
"""

RETURN = r"""
cmd:
  description: The tl-provision argv that ran.
  returned: when tl-provision ran
  type: list
  elements: str
rc:
  description: tl-provision's exit code (0 ok; apply 2 failed; drift 1 drift; accept 1 a fail).
  returned: when tl-provision ran
  type: int
profile_changed:
  description: Whether the profile file differed from O(profile) (and was written unless check).
  returned: always
  type: bool
tasks:
  description: Per-task results of C(apply) (task, status, message, diff, notes, actions).
  returned: command=apply
  type: list
  elements: dict
  sample: [{"task": "StopHook", "status": "changed", "message": "add the Stop hook to ..."}]
recap:
  description: The C(apply) recap counters.
  returned: command=apply
  type: dict
  sample: {"ok": 14, "changed": 3, "failed": 0, "skipped": 2}
findings:
  description: C(drift) findings, each with check, before and after.
  returned: command=drift
  type: list
  elements: dict
accept:
  description: The C(accept) report (ok, counts, numbers, lines with evidence).
  returned: command=accept
  type: dict
stderr:
  description: tl-provision's standard error.
  returned: when tl-provision ran
  type: str
"""

def tl_argv(executable: str, command: str, profile: str, *, check: bool = False,
            restart_claude: bool = False, drill: bool = False,
            source: str | None = None) -> list[str]:
    """The tl-provision argv: ``--check`` passed through to apply, ``--restart-claude`` only
    when asked (never implicit; under ``--check`` tl-provision only says it would restart),
    ``--drill`` only for accept. ``source``: the real profile path when ``profile`` is the
    check-mode copy, so the rendered config (its diff) names the file a real run writes."""
    argv = [executable, command, profile, "--json"]
    if command == "apply" and check:
        argv.append("--check")
    if command == "apply" and source is not None and source != profile:
        argv += ["--profile-source", source]
    if command == "apply" and restart_claude:
        argv.append("--restart-claude")
    if command == "accept" and drill:
        argv.append("--drill")
    return argv


def diff_entries(task: str, text: str) -> list[dict[str, str]]:
    """Ansible diff entries (before/after with headers) from one task's --diff text.

    A ``--- before: X`` / ``+++ after: Y`` pair opens an entry: hunk lines go to before
    (``-``, context) and after (``+``, context); a pair without hunks (the MCP registration)
    compares the header texts. Any other line (``PATH: absent -> directory 0o700``, ``run:
    ARGV``) becomes an entry of its own, split at `` -> `` when it has one.
    """
    entries: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if (line.startswith("--- before: ") and index + 1 < len(lines)
                and lines[index + 1].startswith("+++ after: ")):
            current = {"before_header": line[len("--- before: "):],
                       "after_header": lines[index + 1][len("+++ after: "):],
                       "before": "", "after": ""}
            entries.append(current)
            index += 2
            continue
        index += 1
        if current is not None and line.startswith("@@"):
            continue
        if current is not None and line[:1] in (" ", "-", "+"):
            if line[:1] != "+":
                current["before"] += line[1:] + "\n"
            if line[:1] != "-":
                current["after"] += line[1:] + "\n"
            continue
        if current is not None and line.startswith("\\"):
            continue  # "\ No newline at end of file"
        current = None
        if line.strip():
            before, sep, after = line.partition(" -> ")
            entries.append({"before_header": f"{task}: {before}" if sep else task,
                            "after_header": task,
                            "before": before + "\n" if sep else "",
                            "after": (after if sep else line) + "\n"})
    for entry in entries:
        if not entry["before"] and not entry["after"] and "before_header" in entry:
            entry["before"] = entry["before_header"] + "\n"
            entry["after"] = entry["after_header"] + "\n"
    return entries


def apply_outcome(report: dict[str, Any]) -> dict[str, Any]:
    """changed / failed / msg / diff / tasks / recap from ``tl-provision apply --json``."""
    tasks = report.get("tasks", [])
    recap = report.get("recap", {})
    failed = [t for t in tasks if t.get("status") == "failed"]
    diff: list[dict[str, str]] = []
    for task in tasks:
        if task.get("diff"):
            diff += diff_entries(task["task"], task["diff"])
    mode = " (check mode)" if report.get("check") else ""
    counters = " ".join(f"{key}={recap.get(key, 0)}" for key in
                        ("ok", "changed", "failed", "skipped"))
    if failed:
        msg = "; ".join(f"{t['task']} failed: {t['message']}" for t in failed)
    else:
        msg = f"tl-provision apply{mode} on {report.get('host')}: {counters}"
    return {"changed": recap.get("changed", 0) > 0, "failed": bool(failed)
            or report.get("exit_code", 0) != 0, "msg": msg, "diff": diff, "tasks": tasks,
            "recap": recap}


def drift_outcome(report: dict[str, Any]) -> dict[str, Any]:
    """failed (any finding) / msg / diff / findings from ``tl-provision drift --json``."""
    findings = report.get("findings", [])
    diff = [{"before_header": f"{f['check']} (recorded)", "after_header": f"{f['check']} (now)",
             "before": f"{f['before']}\n", "after": f"{f['after']}\n"} for f in findings]
    if findings:
        msg = "drift since the last apply: " + "; ".join(
            f"{f['check']}: {f['before']} -> {f['after']}" for f in findings)
    else:
        msg = "no drift since the last apply"
    return {"changed": False, "failed": bool(findings), "msg": msg, "diff": diff,
            "findings": findings}


def accept_outcome(report: dict[str, Any]) -> dict[str, Any]:
    """failed (a checklist line failed) / msg / accept from ``tl-provision accept --json``."""
    lines = report.get("lines", [])
    failed = [line for line in lines if line.get("status") == "fail"]
    counts = report.get("counts", {})
    if failed or not report.get("ok", False):
        msg = f"accept failed on {report.get('host')}: " + "; ".join(
            f"{line['name']}: {_evidence(line.get('evidence'))}" for line in failed)
    else:
        msg = (f"accept passed on {report.get('host')}: "
               + " ".join(f"{key}={value}" for key, value in counts.items()))
    return {"changed": False, "failed": bool(failed) or not report.get("ok", False),
            "msg": msg, "accept": report}


def _evidence(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def profile_text(profile: dict[str, Any]) -> str:
    """The profile file's content: JSON (a YAML subset), keys sorted, so equal means equal."""
    return json.dumps(profile, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _one_line(stderr: str, stdout: str) -> str:
    tail = (stderr or stdout).strip().splitlines()
    return tail[-1] if tail else "no output"


def _os_error(exc: OSError, path: str) -> str:
    """``strerror`` plus the file it names when that is not ``path`` itself (its folder)."""
    detail = exc.strerror or str(exc)
    named = os.fsdecode(exc.filename) if exc.filename is not None else path
    return detail if named == path else f"{detail}: {named!r}"


def _install_profile(module: AnsibleModule, path: str, text: str) -> None:
    """``text`` to ``path`` atomically (a temp file beside it, fsync, rename, fsync the
    folder), creating the folder (0755) when missing; no temp file is left behind."""
    directory = os.path.dirname(path)
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(20, "its folder is not a directory", directory)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    try:
        handle, staged = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.",
                                          suffix=".ansible-new", dir=directory)
    except OSError as exc:  # name the folder, not a temp name nobody will find
        raise OSError(exc.errno, exc.strerror, directory) from exc
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), 0o644)
            os.fsync(out.fileno())
        module.atomic_move(staged, path)
    finally:
        if os.path.lexists(staged):
            os.unlink(staged)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)


def _write_profile(module: AnsibleModule, executable: str, path: str,
                   profile: dict[str, Any]) -> tuple[str, dict[str, str] | None]:
    """Validate ``profile``; write it to ``path`` unless check mode; return the path to run
    against and the diff entry (None when the file already holds it)."""
    text = profile_text(profile)
    try:
        before = _read(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = _os_error(exc, path) if isinstance(exc, OSError) else "not UTF-8 text"
        module.fail_json(msg=f"cannot read the host profile {path!r}: {reason}",
                         profile_changed=False)
    handle, temp = tempfile.mkstemp(prefix="host-", suffix=".yml", dir=module.tmpdir)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    rc, out_text, err = module.run_command([executable, "validate", temp])
    if rc != 0:
        module.fail_json(msg=f"host profile for {path} refused: "
                         + _one_line(err, out_text).replace(temp, path),
                         rc=rc, profile_changed=False)
    if before == text:
        return path, None
    entry = {"before_header": path, "after_header": path, "before": before or "",
             "after": text}
    if module.check_mode:
        return temp, entry
    try:
        _install_profile(module, path, text)
    except OSError as exc:
        module.fail_json(msg=f"cannot write the host profile {path!r}: {_os_error(exc, path)}",
                         profile_changed=False)
    return path, entry


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "command": {"type": "str", "choices": ["apply", "drift", "accept"],
                        "default": "apply"},
            "profile_path": {"type": "path", "required": True},
            "profile": {"type": "dict"},
            "executable": {"type": "path", "default": "tl-provision"},
            "restart_claude": {"type": "bool", "default": False},
            "drill": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    executable = params["executable"]
    if not os.path.isabs(executable):
        executable = module.get_bin_path(executable, required=True)
    elif not os.access(executable, os.X_OK):
        module.fail_json(msg=f"tl-provision not found or not executable: {executable!r} "
                         "(install Threadline first)", profile_changed=False)
    path, entry = params["profile_path"], None
    if not os.path.isabs(path):
        module.fail_json(msg=f"profile_path must be an absolute path on the host, got {path!r}",
                         profile_changed=False)
    if params["profile"] is not None:
        path, entry = _write_profile(module, executable, path, params["profile"])
    profile_changed = entry is not None
    command = params["command"]
    if command == "accept" and module.check_mode:
        module.exit_json(changed=False, skipped=True, profile_changed=profile_changed,
                         msg="accept does not run in check mode")
    argv = tl_argv(executable, command, path, check=module.check_mode,
                   restart_claude=params["restart_claude"], drill=params["drill"],
                   source=params["profile_path"])
    rc, out, err = module.run_command(argv)
    try:
        report = json.loads(out)
    except ValueError:
        module.fail_json(msg=f"tl-provision {command} {path} failed (rc={rc}): "
                         + _one_line(err, out), rc=rc, cmd=argv, stderr=err,
                         profile_changed=profile_changed)
    if command == "apply":
        result = apply_outcome(report)
    elif command == "drift":
        result = drift_outcome(report)
    else:
        result = accept_outcome(report)
    if entry is not None:
        result["diff"] = [entry, *result.get("diff", [])]
        result["changed"] = True
    result.update(rc=rc, cmd=argv, stderr=err, profile_changed=profile_changed)
    if result.pop("failed"):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
