"""Protocol models of stored-thread housekeeping: finding a thread by a prefix of its id,
exporting it, deleting it and keeping a client's JSON state in it.

Seed 004 names no methods for these; ``roder sessions`` and ``roder replay`` call them, so
every client can do what the command line does."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.server.protocol import MethodSpec, Ok, ProtocolModel, register

#: ``markdown``: the transcript; ``json``: the eval trajectory (``roder.trajectory/1``);
#: ``atif``: the Agent Trajectory Interchange Format (Harbor), for trainers and viewers.
ExportFormat = Literal["markdown", "json", "atif"]


class ThreadFindParams(ProtocolModel):
    #: A thread id, or any unambiguous prefix of one (``thr_3f2a``, or just ``3f2a``).
    query: str = Field(min_length=1)


class ThreadFindResult(ProtocolModel):
    thread_id: str


class ThreadIdParams(ProtocolModel):
    thread_id: str


class ThreadExportParams(ThreadIdParams):
    format: ExportFormat = "markdown"


class ThreadExportResult(ProtocolModel):
    thread_id: str
    format: ExportFormat
    #: The whole document (JSON formats end with a newline).
    text: str


class ThreadDeleteResult(ProtocolModel):
    thread_id: str


class ThreadCustomSetParams(ThreadIdParams):
    #: Whose state it is (``roder.replay``, an extension's id); the latest entry of a namespace wins.
    namespace: str = Field(min_length=1, max_length=200)
    data: Any
    version: int = Field(default=1, ge=1)


THREAD_FIND = register(
    MethodSpec(
        "thread/find",
        "threads",
        ThreadFindParams,
        ThreadFindResult,
        "The full id of an open or stored thread from its id or an unambiguous prefix.",
    )
)

THREAD_EXPORT = register(
    MethodSpec(
        "thread/export",
        "threads",
        ThreadExportParams,
        ThreadExportResult,
        "A thread as a Markdown transcript, a JSON eval trajectory or ATIF.",
    )
)

THREAD_DELETE = register(
    MethodSpec(
        "thread/delete",
        "threads",
        ThreadIdParams,
        ThreadDeleteResult,
        "Close a thread here and delete its stored file (its forks keep theirs).",
    )
)

THREAD_CUSTOM_SET = register(
    MethodSpec(
        "thread/custom/set",
        "threads",
        ThreadCustomSetParams,
        Ok,
        "Keep a client's JSON state in a thread (never sent to the model; forks carry it).",
    )
)
