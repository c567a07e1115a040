"""Background tasks: the ``shell`` and ``agent`` executors and the tools that read and stop them.

- ``shell`` runs a long-running command (a dev server, a watcher, a long test run) through the
  process broker, sandboxed like any command, in the loopback network its thread's commands
  share: a later ``bash`` call of the same thread reaches a server it started on 127.0.0.1.
- ``agent`` runs one turn of a child thread (its own context, the thread's mode, every tool but
  ``task`` and ``exit_plan``) and records its progress as the task's output.
- ``task_output {task_id, since?}`` reads what a task of this thread printed, capped like
  command output; ``task_kill {task_id}`` stops it and everything it started.

``bash`` starts shell tasks with ``run_in_background``; clients use ``tasks/submit``.
"""

from __future__ import annotations

from roder_core import EXTENSION_API_VERSION, CapabilityRequest, ExtensionManifest, ProvidedService, RoderExtension, __version__
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tools import ToolSet

from .executors import AgentExecutor, ShellExecutor
from .tools import TaskKillTool, TaskOutputTool


class BackgroundTasksExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-background-tasks",
            name="Background tasks",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="shell and agent task executors; task_output and task_kill",
            provides=[
                ProvidedService.TaskExecutor("shell"),
                ProvidedService.TaskExecutor("agent"),
                ProvidedService.ToolProvider("background-tasks"),
            ],
            required_capabilities=[CapabilityRequest("fs.read.workspace"), CapabilityRequest("process.spawn.shell")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.task_executor(ShellExecutor())
        registry.task_executor(AgentExecutor())
        registry.tool_contributor(ToolSet("background-tasks", [TaskOutputTool(), TaskKillTool()]))


def create(host: HostContext) -> RoderExtension:
    return BackgroundTasksExtension()
