"""What each acceptance line means when it fails: the operator's "what to do" column.

``tl-provision accept`` prints the hint under every failed line, the JSON report carries it as
``hint``, and HANDOFF.md quotes the table.
"""

HINTS = {
    "manifest readable": "run 'tl-provision apply HOST.yml' (it records state_dir/provision.json)",
    "runtime config valid": "re-run apply; never hand-edit the rendered config "
                            "(drift reports edits)",
    "project dir exists": "claude has not written a session for this workdir yet, or "
                          "claude.home / CLAUDE_CONFIG_DIR in the profile is wrong",
    "transcripts > 0": "start claude in the workdir and say one thing, then re-run accept",
    "installed paths belong to the claude user": "re-run 'tl-provision apply' as root: it "
                                                 "chowns the state dir, pointer dir and config "
                                                 "to claude.user (0700/0600)",
    "door target alive": "the tmux pane / systemd unit / pointer named in the profile is not "
                         "running claude: fix door.* in the profile or start claude, re-apply",
    "claude binary absolute": "re-run apply on the host where claude really runs; the resume "
                              "argv must start with claude's absolute path",
    "workdir matches project dir": "the wrong-project-dir incident: resume would fail after the "
                                   "old process is gone; fix claude.workdir/home and re-apply",
    "source session id non-empty": "no session transcript in project_dir; talk to claude first",
    "doctor": "run 'tl-rebuild doctor --config CONFIG' and fix each failing check",
    "nothing blocked": "read 'tl-rebuild plan': a poisoned context, carry_overflow=block or "
                       "unrecognised speech (extend the speech rules) needs a human decision "
                       "before any rebuild",
    "selected turns = source turns": "carry_max_tokens drops turns: raise it or set 0 "
                                     "(unlimited) in the profile's rebuild section",
    "nothing dropped": "a cap or include_open_tail=false leaves speech behind; adjust the "
                       "rebuild knobs and re-apply",
    "noise ratio plausible": "below 0.5 usually means the wrong project_dir (SPEC §3.9); "
                             "a young session may also be clean: check with 'tl-rebuild dirty'",
    "hook in settings.json": "re-run apply (a running claude may have rewritten settings.json "
                             "from a stale copy); then restart claude so it reads the hook",
    "hook exits 0 on a synthetic Stop": "run the hook command by hand with a Stop payload on "
                                        "stdin; read state_dir/worker.log",
    "hook schedules nothing": "a Stop from an unknown session must never schedule: report a bug "
                              "with 'tl-rebuild status --json'",
    "MCP lists 7 tools": "run 'claude mcp get NAME' as the claude user; re-apply to re-register",
    "resume argv ≡ launch argv": "the launch command changed since apply: re-run apply "
                                 "(never edit resume_argv by hand)",
    "live argv ≡ launch argv": "the running claude was started differently from the recorded "
                               "launch: restart it the configured way, or re-apply",
    "channel flags kept": "the deaf-process incident: a channel flag of the live claude is "
                          "missing from the resume argv; re-apply",
    "server channels registered": "register the development channel's MCP server "
                                  "('claude mcp add … NAME'), then re-run accept",
    "hook still present after a pause": "a running claude rewrote settings.json: stop other "
                                        "claude sessions of this user, re-apply, restart",
    "hook absent (hook.enabled is false)": "re-run apply: with hook.enabled false it removes "
                                           "our Stop hook; then restart claude",
    "hook still absent after a pause": "a running claude wrote our hook back into settings.json: "
                                       "stop it, re-apply, restart",
    "drill scratch ready": "read the evidence: the scratch copy or its tmux server could not "
                           "be prepared (disk space, tmux missing)",
    "drill old claude running": "the resume argv does not start in the scratch pane: run it by "
                                "hand in the workdir and read what it prints",
    "drill error": "the drill stopped on this error; the scratch folder is kept (path in "
                   "'drill scratch ready') for a look, then remove it",
    "drill activated": "read the drill's timeline in the evidence (failure code and message); "
                       "the same would happen on the real target",
    "drill pane pid changed": "the switch did not replace the process: check the door",
    "drill old transcript byte-identical": "a bug: the source must never change; report it",
    "drill backup present": "state_dir not writable or artifacts pruned too early",
    "drill channel flags on the new process": "the deaf process: re-apply so the resume argv "
                                              "keeps every channel flag",
    "drill timeline complete": "a phase is missing from the operation's timeline: report a bug "
                               "with the evidence",
    "drill no orphans": "processes of the scratch HOME/dir outlived the drill (listed); they "
                        "were killed — check that nothing there talks to a real channel",
    "live requested": "an operation is already active: 'tl-rebuild status', wait or cancel",
    "live switched": "read 'tl-rebuild status --json'; a rolled_back operation kept the old "
                     "session (nothing lost)",
    "live channel heard": "send a message through that channel yourself (a human must) and "
                          "re-run with a longer --wait-minutes; if it never arrives, roll back",
    # Codex host (accept/codex.py, accept/codex_drill.py)
    "sessions dir exists": "codex has no sessions/ under the profile's codex.home: fix "
                           "codex.home (the CODEX_HOME codex runs with) and re-apply",
    "rollouts > 0": "talk to codex once (a rollout is written at the first turn), then re-run",
    "installed paths belong to the codex user": "re-run 'tl-provision apply' as root: it "
                                                "chowns the state dir and config to codex.user",
    "codex binary absolute": "re-run apply on the host where codex really runs; the resume "
                             "argv must start with codex's absolute path",
    "source thread held by the pane": "the pane's codex holds no thread's writer lock (or two, "
                                      "after /fork): launch it with --no-daemon, say one "
                                      "thing, re-run accept",
    "notify runs tl-rebuild hook-notify": "re-run apply: it chains our notify head before "
                                          "yours in config.toml; then restart codex",
    "notify exits 0 on a synthetic turn end": "run the notify head by hand with a payload as "
                                              "last argument; read state_dir/worker.log",
    "notify schedules nothing": "a turn end of an unknown thread must never schedule: report "
                                "a bug with 'tl-rebuild status --json'",
    "MCP server in config.toml": "re-run apply: it upserts [mcp_servers.NAME] in config.toml",
    "codex mcp list shows the server": "run 'codex mcp list --json' with this CODEX_HOME as "
                                       "the codex user; re-apply",
    "MCP server lists its 7 tools": "run the [mcp_servers.NAME] command of config.toml by "
                                    "hand as the codex user; read what it prints; re-apply",
    "codex holds its thread in the pane": "add --no-daemon to the codex command, restart it, "
                                          "re-run apply (a codex on the shared app-server "
                                          "daemon cannot be switched)",
    "notify still present after a pause": "a running codex rewrote config.toml: re-apply, "
                                          "restart codex",
    "drill old codex running": "the resume argv does not start codex on the copied thread in "
                               "the scratch pane (screen in the evidence): run it by hand",
    "drill new codex holds the new thread": "the switch did not leave codex on the rebuilt "
                                            "thread with every option: read the timeline",
    "drill old rollout byte-identical": "a bug: the source rollout must never change; report it",
    "drill no model request": "the scratch codex sent a request to the stand-in model "
                              "(listed): nothing may talk to a model in a drill; report it",
}
