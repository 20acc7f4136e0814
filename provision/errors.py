"""Errors of the provision package.

    ProvisionError
    ├── ProfileError        host.yml is unreadable or invalid (every error with its path)
    ├── FactError           a fact could not be read from the host (names the command)
    ├── IntrospectError     the launch command is ambiguous or disagrees with the live process
    ├── ResumeError         no resume argv can be computed from the launch argv
    ├── SettingsError       settings.json is malformed / JSONC / BOM / empty / not an object
    ├── RenderError         a template failed to render or validate
    ├── McpRegistrationError  the claude CLI refused, or a same-name server sits in another scope
    ├── VerifyError         a post-install check failed (names the check and its evidence)
    ├── ManifestError       state_dir/provision.json is missing or unreadable (drift needs it)
    ├── AcceptError         accept was called wrongly (--live without --confirm REBUILD, …)
    ├── RestartError        --restart-claude: claude did not come back ready (names what is missing)
    └── HostError           a command run through provision.host failed or is missing
"""

from __future__ import annotations


class ProvisionError(Exception):
    """Base of every error tl-provision raises on purpose."""


class ProfileError(ProvisionError):
    """The host profile is unreadable or does not validate."""


class FactError(ProvisionError):
    """A fact could not be read from the host."""


class IntrospectError(ProvisionError):
    """The real launch command cannot be determined without ambiguity."""


class ResumeError(ProvisionError):
    """No resume argv can be computed from the launch argv."""


class SettingsError(ProvisionError):
    """settings.json cannot be merged safely."""


class RenderError(ProvisionError):
    """A template failed to render or to validate."""


class McpRegistrationError(ProvisionError):
    """The MCP server could not be registered through the claude CLI."""


class VerifyError(ProvisionError):
    """A post-install verification check failed."""


class ManifestError(ProvisionError):
    """The manifest of the last apply is missing or unreadable."""


class AcceptError(ProvisionError):
    """accept was called in a way that must not run (nothing was done)."""


class RestartError(ProvisionError):
    """The restarted claude is not ready: warning unanswered, wrong session, a channel deaf."""


class HostError(ProvisionError):
    """A command run through provision.host failed or is missing."""
