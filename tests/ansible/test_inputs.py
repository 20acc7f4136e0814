"""What a fleet operator's inventory may hold that it should not: the role's variables typo'd or
missing, module arguments that are not usable paths. Real ``ansible-playbook`` on hosts that are
folders of one temp dir (``ansible_connection=local``); every case fails before tl-provision
changes anything, so no claude or tmux is needed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.ansible.conftest import _ansible_bin, parse_recap

FATAL = re.compile(r"^fatal: \[(?P<host>[^\]]+)\]: FAILED! => (?P<result>\{.*\})$", re.M)


def play(tmp_path: Path, env: dict[str, str], hosts: dict[str, dict], tasks: list[dict],
         *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    """Run one play of ``tasks`` on ``hosts``; return the run and each failed host's result."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "threadline_python": sys.executable},
        "hosts": hosts}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False,
                                         "tasks": tasks}]))
    done = subprocess.run([_ansible_bin("ansible-playbook"), "-i", str(inventory),
                           str(playbook), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300, stdin=subprocess.DEVNULL)
    fatal = {m["host"]: json.loads(m["result"]) for m in FATAL.finditer(done.stdout)}
    return done, fatal


def valid_profile(root: Path) -> dict:
    return {"host": "box", "claude": {"user": "root", "home": str(root)},
            "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
            "install": {"prefix": str(root / "opt"), "config_path": str(root / "c.toml"),
                        "state_dir": str(root / "state")}}


def test_unusable_profile_paths_fail_with_one_line_naming_the_path_and_leave_nothing(
        tmp_path: Path, installed_collection: tuple[Path, dict[str, str]]) -> None:
    _, env = installed_collection
    (tmp_path / "a file").write_text("not a folder\n")
    (tmp_path / "a folder").mkdir()
    (tmp_path / "ünmounted").symlink_to(tmp_path / "mnt" / "config")  # dangling
    paths = {"empty": "", "relative": "host.yml", "folder": str(tmp_path / "a folder"),
             "under_a_file": str(tmp_path / "a file" / "hôst.yml"),
             "dangling_folder": str(tmp_path / "ünmounted" / "host.yml")}
    hosts = {name: {"profile_at": path} for name, path in paths.items()}
    task = {"threadline.companion.provision": {
        "executable": str(Path(sys.executable).with_name("tl-provision")),
        "profile_path": "{{ profile_at }}", "profile": valid_profile(tmp_path)}}
    done, fatal = play(tmp_path, env, hosts, [task])
    assert set(fatal) == set(paths), done.stdout
    messages = {host: result["msg"] for host, result in fatal.items()}
    assert messages == {
        "empty": "profile_path must be an absolute path on the host, got ''",
        "relative": "profile_path must be an absolute path on the host, got 'host.yml'",
        "folder": f"cannot read the host profile {paths['folder']!r}: Is a directory",
        "under_a_file": f"cannot read the host profile {paths['under_a_file']!r}: "
                        "Not a directory",
        "dangling_folder": f"cannot write the host profile {paths['dangling_folder']!r}: its "
                           f"folder is not a directory: {str(tmp_path / 'ünmounted')!r}"}, \
        done.stdout
    assert all("exception" not in result for result in fatal.values()), done.stdout
    assert not list(tmp_path.rglob("*ansible-new*")), list(tmp_path.rglob("*"))
    assert (tmp_path / "a file").read_text() == "not a folder\n"
    assert not (tmp_path / "mnt").exists()


def test_a_typo_in_a_role_variable_or_a_missing_profile_fails_the_host_before_installing(
        tmp_path: Path, installed_collection: tuple[Path, dict[str, str]]) -> None:
    _, env = installed_collection
    fine = {"threadline_prefix": str(tmp_path / "fine" / "opt"),
            "threadline_profile_path": str(tmp_path / "fine" / "host.yml"),
            "threadline_profile": valid_profile(tmp_path / "fine")}
    hosts = {"fine": fine,
             "typo": {**fine, "threadline_profile_pth": "/etc/threadline/other.yml"},
             "missing": {k: v for k, v in fine.items() if k != "threadline_profile"}}
    role = {"ansible.builtin.include_role": {"name": "threadline.companion.companion"}}
    done, fatal = play(tmp_path, env, hosts, [role], "--check")
    seen = parse_recap(done.stdout)
    assert seen["fine"]["failed"] == 0, done.stdout
    assert set(fatal) == {"typo", "missing"}, done.stdout
    assert fatal["typo"]["msg"].startswith(
        'threadline.companion.companion: unknown variable(s) "threadline_profile_pth" (a typo?); '
        "known: "), fatal["typo"]["msg"]
    assert "threadline_profile_path" in fatal["typo"]["msg"]
    assert "missing required arguments: threadline_profile" in fatal["missing"]["msg"]
    assert not (tmp_path / "fine" / "opt").exists()
