"""Issue 11 §6: every file the installer writes goes through LocalHost.write_file, which writes
through a symlink (backing up the target), refuses a dangling link and a read-only file, and
leaves no stray backup when the write fails (real files in a temp folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.errors import HostError
from provision.host import LocalHost


def test_a_symlinked_settings_file_is_written_through_and_the_link_stays(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"old": true}\n')
    link = tmp_path / "settings.json"
    link.symlink_to(dotfiles)

    backup = LocalHost().write_file(str(link), b'{"new": true}\n')

    assert link.is_symlink() and os.readlink(link) == str(dotfiles)
    assert dotfiles.read_text() == '{"new": true}\n'
    assert backup is not None and Path(backup).parent == dotfiles.parent
    assert Path(backup).read_text() == '{"old": true}\n'


def test_a_dangling_symlink_is_refused_and_stays_a_link(tmp_path: Path) -> None:
    link = tmp_path / "settings.json"
    link.symlink_to(tmp_path / "gone" / "settings.json")
    with pytest.raises(HostError, match=r"is a symlink to .*gone/settings\.json', which does "
                                        r"not exist; nothing written"):
        LocalHost().write_file(str(link), b"{}\n")
    assert link.is_symlink() and not (tmp_path / "gone").exists()


def test_a_read_only_settings_file_is_refused_untouched_even_for_root(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"keep": 1}\n')
    settings.chmod(0o444)
    with pytest.raises(HostError, match=r"is read-only \(mode 0444\); nothing written"):
        LocalHost().write_file(str(settings), b"{}\n")
    assert settings.read_text() == '{"keep": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


FAILING_WRITE = """
import resource, signal, sys
from provision.errors import HostError
from provision.host import LocalHost
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # the old file fits, the new does not
try:
    LocalHost().write_file(sys.argv[1], b"x" * 100_000)
except HostError as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_failed_write_leaves_the_file_and_no_stray_backup(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"keep": 1}\n')
    done = subprocess.run([sys.executable, "-c", FAILING_WRITE, str(settings)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3 and "cannot write" in done.stdout, done.stderr
    assert settings.read_text() == '{"keep": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def _stop_hook_ctx(home: Path, overwrite: bool | None = None):
    import pwd

    from provision.profile import profile_from_mapping
    from provision.result import Context

    install = {"config_path": str(home / "etc" / "config.toml"), "state_dir": str(home / "st"),
               "prefix": str(Path(sys.executable).parent.parent)}
    if overwrite is not None:
        install["overwrite_read_only"] = overwrite
    return Context(profile=profile_from_mapping({
        "host": "test", "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(home)},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}}, "install": install}))


def test_the_stop_hook_task_refuses_a_read_only_settings_file_unless_the_profile_allows_it(
    tmp_path: Path,
) -> None:
    from provision.tasks.settings import StopHook

    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    settings.chmod(0o444)
    host, task = LocalHost(), StopHook()
    refused = _stop_hook_ctx(tmp_path)
    with pytest.raises(HostError, match="read-only"):
        for action in task.plan(task.facts(host, refused), refused):
            action.execute(host)
    assert settings.read_text() == '{"model": "opus"}\n'
    allowed = _stop_hook_ctx(tmp_path, overwrite=True)
    for action in task.plan(task.facts(host, allowed), allowed):
        action.execute(host)
    assert "tl-rebuild hook-stop" in settings.read_text()


def test_two_writes_of_one_file_in_one_second_keep_both_backups(tmp_path: Path) -> None:
    """apply then uninstall from one process (the Ansible module, a test) within a second: the
    second backup must not overwrite the first one (which holds the user's original)."""
    path = tmp_path / "config.toml"
    path.write_bytes(b"original\n")
    first = LocalHost().write_file(str(path), b"merged\n")
    second = LocalHost().write_file(str(path), b"original\n")
    assert first and second and first != second
    assert (Path(first).read_bytes(), Path(second).read_bytes()) == (b"original\n", b"merged\n")
