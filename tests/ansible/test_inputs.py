"""What a fleet operator's inventory may hold that it should not: the role's variables typo'd or
missing, module arguments that are not usable paths. Real ``ansible-playbook`` on hosts that are
folders of one temp dir (``ansible_connection=local``); every case fails before tl-provision
changes anything, so no claude or tmux is needed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.ansible.conftest import _ansible_bin, _private_ansible_env, parse_recap
from tests.fixtures.guard import claim_socket_name
from tests.fixtures.second_user import NAME, UID, SecondUser, second_user  # noqa: F401

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


def test_a_typo_a_missing_profile_or_a_clashing_prefix_fails_the_host_before_installing(
        tmp_path: Path, installed_collection: tuple[Path, dict[str, str]]) -> None:
    _, env = installed_collection
    fine = {"threadline_prefix": str(tmp_path / "fine" / "opt"),
            "threadline_profile_path": str(tmp_path / "fine" / "host.yml"),
            "threadline_profile": valid_profile(tmp_path / "fine")}
    elsewhere = valid_profile(tmp_path / "fine")
    elsewhere["install"]["prefix"] = "/srv/elsewhere"
    hosts = {"fine": fine,
             "typo": {**fine, "threadline_profile_pth": "/etc/threadline/other.yml"},
             "missing": {k: v for k, v in fine.items() if k != "threadline_profile"},
             "prefix_clash": {**fine, "threadline_profile": elsewhere}}
    role = {"ansible.builtin.include_role": {"name": "threadline.companion.companion"}}
    done, fatal = play(tmp_path, env, hosts, [role], "--check")
    seen = parse_recap(done.stdout)
    assert seen["fine"]["failed"] == 0, done.stdout
    assert set(fatal) == {"typo", "missing", "prefix_clash"}, done.stdout
    assert fatal["typo"]["msg"].startswith(
        'threadline.companion.companion: unknown variable(s) "threadline_profile_pth" (a typo?); '
        "known: "), fatal["typo"]["msg"]
    assert "threadline_profile_path" in fatal["typo"]["msg"]
    assert "missing required arguments: threadline_profile" in fatal["missing"]["msg"]
    assert fatal["prefix_clash"]["msg"] == (
        'threadline_profile.install.prefix "/srv/elsewhere" differs from threadline_prefix '
        f'"{fine["threadline_prefix"]}" (where the role installs Threadline); set '
        "threadline_prefix instead, or drop install.prefix from threadline_profile")
    assert not (tmp_path / "fine" / "opt").exists()


def test_become_user_a_non_root_claude_user_writes_its_own_profile_and_names_a_folder_it_cannot(
        second_user: SecondUser,  # noqa: F811 - the fixture
        installed_collection: tuple[Path, dict[str, str]]) -> None:
    if shutil.which("sudo") is None:
        pytest.skip("needs sudo (the become method; .ci/run installs it)")
    collections, _ = installed_collection
    work = second_user.root / "work"
    (work / "etc").mkdir(parents=True)  # root's, 0755: the claude user cannot write here
    env = {**_private_ansible_env(work, collections), "HOME": str(work), "USER": "root",
           "LOGNAME": "root"}  # ansible's local user is root: become switches to the claude user
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"box": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    own, foreign = second_user.home / "host.yml", work / "etc" / "host.yml"
    profile = valid_profile(second_user.home)
    profile["claude"]["user"] = NAME
    # apply then stops at LaunchCommand: no tmux server on a socket nobody else uses
    socket = claim_socket_name(f"tl-ans-become-{uuid.uuid4().hex[:8]}")
    profile["door"]["tmux"]["socket_name"] = socket
    playbook = work / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False, "become": True, "become_user": NAME,
        "become_method": "sudo", "tasks": [{
            "threadline.companion.provision": {
                "executable": str(Path(sys.executable).with_name("tl-provision")),
                "profile_path": "{{ item }}", "profile": profile},
            "loop": [str(own), str(foreign)]}]}]))
    done = second_user.run(_ansible_bin("ansible-playbook"), "-i", str(inventory),
                           str(playbook), as_user=False, check=False, env=env, timeout=300)
    results = {json.loads(m["result"])["item"]: json.loads(m["result"])
               for m in re.finditer(r"^failed: \[box\] \(item=[^)]*\) => (?P<result>\{.*\})$",
                                    done.stdout, re.M)}
    assert results[str(foreign)]["msg"] == (
        f"cannot write the host profile {str(foreign)!r}: Permission denied: "
        f"{str(work / 'etc')!r}"), done.stdout
    # the claude user's own folder: written (as the user), then apply ran as the user
    assert results[str(own)]["profile_changed"] is True, done.stdout
    assert results[str(own)]["msg"].startswith("LaunchCommand failed: "), done.stdout
    assert own.stat().st_uid == UID and json.loads(own.read_text()) == profile
    assert list((work / "etc").iterdir()) == []
