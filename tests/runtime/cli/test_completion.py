"""``tl-rebuild|tl-provision completion bash|zsh``: scripts made from the argparse tree, loaded
and called in the real shells."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from provision.cli import main as provision_main
from runtime.cli import main as rebuild_main

MAINS: dict[str, Callable[[list[str]], int]] = {
    "tl-rebuild": rebuild_main, "tl-provision": provision_main}


def script(capsys: pytest.CaptureFixture[str], prog: str, shell: str, tmp_path: Path) -> Path:
    code = MAINS[prog](["completion", shell])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    path = tmp_path / f"{prog}.{shell}"
    path.write_text(out, encoding="utf-8")
    return path


def complete(path: Path, words: list[str], cwd: Path) -> list[str]:
    """What bash offers for the last of ``words`` (the line typed so far), through the
    function the script registered for the program with ``complete -F``."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    line = " ".join(words)
    body = (
        f"source {shlex.quote(str(path))} || exit 3\n"
        f'func=$(complete -p {shlex.quote(words[0])} | sed -E "s/.* -F ([^ ]+) .*/\\1/")\n'
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}\nCOMP_POINT={len(line)}\n"
        f'"$func" {shlex.quote(words[0])} {shlex.quote(words[-1])} {shlex.quote(words[-2])}\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", body], capture_output=True,
                          text=True, timeout=60, cwd=cwd, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return [w.strip() for w in done.stdout.splitlines() if w.strip()]


def test_bash_offers_tl_rebuilds_sub_commands_and_plan_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = script(capsys, "tl-rebuild", "bash", tmp_path)
    offered = complete(path, ["tl-rebuild", ""], tmp_path)
    for name in ("plan", "dirty", "fork", "request", "status", "cancel", "rollback", "recover",
                 "gc", "doctor", "mcp", "completion"):
        assert name in offered
    plan = complete(path, ["tl-rebuild", "plan", "--"], tmp_path)
    assert {"--config", "--json", "--transcript", "--show", "--agent"} <= set(plan)
    assert "--into" not in plan  # fork's option, not plan's
    assert complete(path, ["tl-rebuild", "plan", "--agent", ""], tmp_path) == ["claude", "codex"]
    assert complete(path, ["tl-rebuild", "completion", ""], tmp_path) == ["bash", "zsh"]


def test_bash_completes_a_transcript_path_with_file_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = script(capsys, "tl-rebuild", "bash", tmp_path)
    (tmp_path / "session-a.jsonl").write_text("", encoding="utf-8")
    offered = complete(path, ["tl-rebuild", "plan", "--transcript", "sess"], tmp_path)
    assert offered == ["session-a.jsonl"]


def test_bash_offers_tl_provisions_sub_commands_and_apply_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = script(capsys, "tl-provision", "bash", tmp_path)
    offered = complete(path, ["tl-provision", ""], tmp_path)
    assert {"validate", "introspect", "apply", "drift", "accept", "completion"} <= set(offered)
    apply = complete(path, ["tl-provision", "apply", "--"], tmp_path)
    assert {"--check", "--diff", "--json", "--restart-claude", "--verbose"} <= set(apply)


@pytest.mark.parametrize("prog", ["tl-rebuild", "tl-provision"])
def test_zsh_loads_the_script_and_registers_its_function(
    prog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (.ci/run installs it with apt)")
    path = script(capsys, prog, "zsh", tmp_path)
    func = "_shtab_" + prog.replace("-", "_")
    body = (f"autoload -U compinit; compinit -u -d {shlex.quote(str(tmp_path / 'zcompdump'))}; "
            f"source {shlex.quote(str(path))}; "
            f"print -r -- ${{+functions[{func}]}} ${{_comps[{prog}]}}")
    done = subprocess.run(["zsh", "-f", "-c", body], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == ["1", func]


def test_completion_refuses_an_unknown_shell(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        rebuild_main(["completion", "fish"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err
