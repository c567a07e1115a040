"""The container runner's start options that do not need Podman: limits within Roder's own, the
``oci_runtime`` setting, and the start errors that name the setting to change."""

from __future__ import annotations

import resource

import pytest
from pydantic import ValidationError
from roder_ext_runners.container import MAX_NOFILE, MAX_NPROC, ContainerRunnerProvider, container_ulimits, start_hint
from roder_ext_runners.ssh import SshRunnerProvider

from roder_core.kernel.services import RunnerDefinition
from roder_core.settings.runners import RunnerConfig


def test_ulimits_stay_within_this_processs_hard_limits() -> None:
    options = container_ulimits()
    assert options[0::2] == ["--ulimit", "--ulimit"]
    limits = dict(option.split("=") for option in options[1::2])
    for name, which, ceiling in (("nofile", resource.RLIMIT_NOFILE, MAX_NOFILE), ("nproc", resource.RLIMIT_NPROC, MAX_NPROC)):
        soft, hard = (int(v) for v in limits[name].split(":"))
        own = resource.getrlimit(which)[1]
        assert soft == hard <= ceiling
        assert own == resource.RLIM_INFINITY or hard <= own


def test_known_start_failures_name_the_setting_to_change() -> None:
    hybrid = start_hint("Error: OCI runtime error: crun: cgroups in hybrid mode not supported, drop all controllers", "box")
    assert 'oci_runtime = "runc" in [runners.box]' in hybrid
    rlimit = start_hint("Error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied", "box")
    assert "run_args" in rlimit and "--ulimit" in rlimit
    assert start_hint("Error: something else", "box") == ""


def test_oci_runtime_is_a_container_setting() -> None:
    config = RunnerConfig.of("container", {"image": "localhost/x", "oci_runtime": "runc"})
    assert config.oci_runtime == "runc"
    ContainerRunnerProvider().check(RunnerDefinition("box", "container", {"image": "localhost/x", "oci_runtime": "runc"}))
    with pytest.raises(ValidationError):
        RunnerConfig.of("container", {"image": "localhost/x", "oci_runtime": "runc --debug"})
    ssh = RunnerDefinition("far", "ssh", {"host": "h", "workspace": "/w", "oci_runtime": "runc"})
    with pytest.raises(ValueError, match="oci_runtime is a container setting"):
        SshRunnerProvider().check(ssh)
