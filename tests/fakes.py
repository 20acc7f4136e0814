"""A fake provision host: canned files and command outputs in, recorded writes out.

Unit tests of facts → plan → actions use it instead of patching subprocess (STYLE.md rule 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.errors import HostError
from provision.host import FileStat, Host
from runtime.proc import Result

NPM_GLOBAL_LINKS = {
    "/usr/bin/claude": "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
    "/usr/local/bin/claude": "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
}


@dataclass
class FakeHost(Host):
    """Serves ``files`` and ``commands`` (argv tuple → result); records writes and commands run."""

    files: dict[str, bytes] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    dirs: dict[str, int] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    commands: dict[tuple[str, ...], Result] = field(default_factory=dict)
    executables: set[str] = field(default_factory=set)
    ran: list[tuple[str, ...]] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    name: str = "fakehost"
    # ``id -u/-g NAME`` answers; every fake file belongs to uid/gid 0 (see stat), so do these
    users: dict[str, tuple[int, int]] = field(
        default_factory=lambda: {"claude": (0, 0), "root": (0, 0)})
    path: tuple[str, ...] | None = None  # which() searches these folders; None: every executable

    def __post_init__(self) -> None:
        # `npm install -g @anthropic-ai/claude-code` links its bin into the PATH like this;
        # a test that wants claude to be something else sets its own link.
        for path, target in NPM_GLOBAL_LINKS.items():
            self.links.setdefault(path, target)

    def add_command(self, argv: Sequence[str], stdout: str = "", rc: int = 0,
                    stderr: str = "") -> None:
        self.commands[tuple(argv)] = Result(tuple(argv), rc, stdout, stderr)

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 30.0,
            input_text: str | None = None) -> Result:
        key = tuple(str(a) for a in argv)
        self.ran.append(key)
        if key not in self.commands and key[:2] in (("id", "-u"), ("id", "-g")):
            ids = self.users.get(key[2] if len(key) == 3 else "root")  # apply runs as root
            if ids is None:
                return Result(key, 1, "", f"id: '{key[2]}': no such user\n")
            return Result(key, 0, f"{ids[0] if key[1] == '-u' else ids[1]}\n", "")
        if key not in self.commands:
            raise HostError(f"command not found: {key[0]!r}")
        return self.commands[key]

    def read_bytes(self, path: str) -> bytes | None:
        return self.files.get(path)

    def stat(self, path: str) -> FileStat | None:
        if path in self.dirs:
            return FileStat(True, self.dirs[path], 0, 0, 0.0, True)
        if path in self.files:
            return FileStat(False, self.modes.get(path, 0o644), 0, 0, 0.0,
                            path in self.executables)
        return None

    def readlink(self, path: str) -> str | None:
        return self.links.get(path)

    def listdir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix):].split("/")[0] for p in [*self.files, *self.dirs]
                 if p.startswith(prefix)}
        return sorted(names)

    def which(self, name: str) -> str | None:
        if name.startswith("/"):
            return name if name in self.executables else None
        if self.path is not None:  # tl-provision's own PATH, when a test gives it one
            return next((f"{d}/{name}" for d in self.path if f"{d}/{name}" in self.executables),
                        None)
        for candidate in sorted(self.executables):
            if candidate.rsplit("/", 1)[-1] == name:
                return candidate
        return None

    def write_file(self, path: str, data: bytes, *, mode: int | None = None,
                   backup: bool = True, overwrite_read_only: bool = False) -> str | None:
        old = self.files.get(path)
        backup_path = None
        if backup and old is not None:
            backup_path = f"{path}.bak~"
            self.files[backup_path] = old
        self.files[path] = data
        self.modes[path] = mode if mode is not None else self.modes.get(path, 0o644)
        self.written.append(path)
        return backup_path

    def ensure_dir(self, path: str, mode: int) -> None:
        self.dirs[path] = mode
        self.written.append(path)


class SandboxHost(Host):
    """The provision Host as seen from inside a ``systemd_sandbox`` (tests/fixtures/).

    Commands and /proc reads run inside the instance's namespaces (nsenter); unit files under
    /etc/systemd/system map to the instance's own ``etc-units`` directory; every other path is
    a shared directory visible at the same path on both sides. Nothing touches the host's units.
    """

    UNIT_DIR = "/etc/systemd/system"

    def __init__(self, sandbox: Any, env: Mapping[str, str] | None = None,
                 private: Mapping[str, Any] | None = None) -> None:
        from provision.host import LocalHost

        self.sandbox = sandbox
        self.env = dict(env or {})
        # other folders the instance binds from a host folder of its own (/etc/sudoers.d …)
        self.private = {str(k): str(v) for k, v in (private or {}).items()}
        self.local = LocalHost("sandbox")
        self.name = "sandbox"

    def _path(self, path: str) -> str:
        if path == self.UNIT_DIR or path.startswith(self.UNIT_DIR + "/"):
            return str(self.sandbox.state / "etc-units") + path[len(self.UNIT_DIR):]
        for inside, outside in self.private.items():
            if path == inside or path.startswith(inside + "/"):
                return outside + path[len(inside):]
        return path

    def _inside(self, *argv: str) -> Result:
        return self.local.run([*self.sandbox.enter_argv(), *argv], timeout=60)

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 30.0,
            input_text: str | None = None) -> Result:
        merged = {**self.env, **(env or {})} or None
        result = self.local.run([*self.sandbox.enter_argv(), *argv], env=merged, cwd=cwd,
                                timeout=timeout, input_text=input_text)
        return Result(tuple(argv), result.rc, result.stdout, result.stderr)

    def read_bytes(self, path: str) -> bytes | None:
        if path.startswith("/proc/"):
            result = self._inside("cat", path)
            return result.stdout.encode() if result.ok else None
        return self.local.read_bytes(self._path(path))

    def stat(self, path: str) -> FileStat | None:
        return self.local.stat(self._path(path))

    def readlink(self, path: str) -> str | None:
        if path.startswith("/proc/"):
            result = self._inside("readlink", path)
            return result.stdout.strip() if result.ok else None
        return self.local.readlink(self._path(path))

    def listdir(self, path: str) -> list[str]:
        if path.startswith("/proc/"):
            result = self._inside("ls", "-1", path)
            return result.stdout.split() if result.ok else []
        return self.local.listdir(self._path(path))

    def which(self, name: str) -> str | None:
        return self.local.which(name)

    def write_file(self, path: str, data: bytes, *, mode: int | None = None,
                   backup: bool = True, overwrite_read_only: bool = False) -> str | None:
        return self.local.write_file(self._path(path), data, mode=mode, backup=backup,
                                     overwrite_read_only=overwrite_read_only)

    def ensure_dir(self, path: str, mode: int) -> None:
        self.local.ensure_dir(self._path(path), mode)
