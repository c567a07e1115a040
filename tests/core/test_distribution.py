"""Entry-point discovery, capability profiles and project trust in the default distribution."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from roder_core import EXTENSION_API_VERSION, CapabilityRequest, ExtensionManifest, ProvidedService, RoderExtension
from roder_core.kernel.distribution import build_distribution, make_host
from roder_core.policy.trust import TrustStore


class WebExt(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="web-ext",
            name="Web",
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            provides=[ProvidedService.EventSink("web-sink")],
            required_capabilities=[CapabilityRequest("network.web")],
        )

    def install(self, registry: object) -> None:
        class Sink:
            def id(self) -> str:
                return "web-sink"

            def on_event(self, event: object) -> None:
                pass

        registry.event_sink(Sink())  # type: ignore[attr-defined]


def test_builtin_mock_is_discovered_through_entry_points(workspace: Path) -> None:
    dist = build_distribution(make_host(workspace))
    assert dist.registry.inference_engine("mock") is not None
    assert dist.registry.manifest("roder-ext-mock") is not None


def test_developer_profile_grants_and_eval_profile_skips_denied(workspace: Path) -> None:
    dev = build_distribution(make_host(workspace), [("test", lambda host: WebExt())])
    assert dev.registry.granted_capabilities("web-ext") == frozenset({"network.web"})
    evalp = build_distribution(make_host(workspace, profile="eval-sandbox"), [("test", lambda host: WebExt())])
    assert evalp.registry.manifest("web-ext") is None
    assert "denies network.web" in evalp.skipped[0].reason


def test_broken_extension_is_skipped_and_reported(workspace: Path) -> None:
    def boom(host: object) -> None:
        raise ImportError("missing dependency foo")

    dist = build_distribution(make_host(workspace), [("entry point broken", boom), ("web", lambda h: WebExt())])
    assert dist.registry.manifest("web-ext") is not None
    assert dist.skipped[0].source == "entry point broken"
    assert "missing dependency foo" in dist.skipped[0].reason


def test_project_extensions_need_trust(workspace: Path, roder_home: Path) -> None:
    ext_dir = workspace / ".roder" / "extensions"
    ext_dir.mkdir(parents=True)
    (ext_dir / "proj.py").write_text(
        "from roder_core import *\n"
        "class P(RoderExtension):\n"
        "    def manifest(self):\n"
        "        return ExtensionManifest(id='proj-ext', name='P', version='0.1.0', api_version=EXTENSION_API_VERSION)\n"
        "    def install(self, registry):\n"
        "        pass\n"
        "def create(host):\n"
        "    return P()\n"
    )
    assert build_distribution(make_host(workspace)).registry.manifest("proj-ext") is None
    TrustStore(make_host(workspace).paths).set(workspace, True)
    assert build_distribution(make_host(workspace)).registry.manifest("proj-ext") is not None
    assert build_distribution(make_host(workspace, trust=False)).registry.manifest("proj-ext") is None


def test_project_config_is_read_only_when_trusted(workspace: Path) -> None:
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text('mode = "bypass"\n')
    assert make_host(workspace).config.mode == "ask"
    assert make_host(workspace, trust=True).config.mode == "bypass"


def test_extensions_list_json_cli(workspace: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "extensions", "list", "--json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
    )
    data = json.loads(proc.stdout)
    ids = [e["id"] for e in data["extensions"]]
    assert "roder-ext-mock" in ids
    assert set(data["capability_statuses"]) == set(ids)
    for ext in data["extensions"]:
        assert set(ext) == {"id", "name", "version", "api_version", "description", "provides", "required_capabilities"}
