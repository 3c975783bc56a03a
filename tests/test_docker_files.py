"""The docker/ stack without Docker: CI has no engine, so these tests check what can be
checked here. compose.yaml's structure; the rendered broker and controller configs read
with our own Kafka properties parser; the Dockerfile's instructions; the shell scripts'
syntax; render.py's validation; and, for real, our controller started on the rendered
controller.properties with our fake broker on a rendered broker config (moved to
loopback) registering its two log directories."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller import config as controller_config
from kraft_jbod.controller.config import parse_listeners, parse_properties
from kraft_jbod.controller.features import level_of
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.storage import StorageLayout, format_storage, read_meta_properties

DOCKER = Path(__file__).resolve().parent.parent / "docker"


def _load_render() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kraft_jbod_docker_render", DOCKER / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


render = _load_render()
SETTINGS_TEXT = (DOCKER / "settings.ini").read_text(encoding="utf-8")


@pytest.fixture()
def rendered(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert render.main(["--out", str(out)]) == 0
    return out


def _settings() -> Any:
    return render.load_settings(DOCKER / "settings.ini")


def _compose(root: Path) -> dict[str, Any]:
    data = yaml.safe_load((root / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _props(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- render.py


def test_checked_in_files_match_the_settings() -> None:
    assert render.stale(DOCKER, render.render(_settings())) == []
    assert render.main(["--check"]) == 0


def test_check_reports_an_edited_file(rendered: Path) -> None:
    assert render.main(["--out", str(rendered), "--check"]) == 0
    target = rendered / "generated" / "controller.properties"
    target.write_text(target.read_text(encoding="utf-8") + "node.id=1\n", encoding="utf-8")
    assert render.main(["--out", str(rendered), "--check"]) == 1
    (rendered / "compose.yaml").unlink()
    assert render.stale(rendered, render.render(_settings())) == ["compose.yaml", "generated/controller.properties"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("S2pCb0RvY2tlckpib2QwMQ", "not-a-uuid"), "cluster_id"),
        (("S2pCb0RvY2tlckpib2QwMQ", "S2pCb0RvY2tlckpib2QwMR"), "16 bytes"),  # stray bits past 128
        (("metadata_version = 3.9-IV0", "metadata_version = 3.6-IV2"), "JBOD"),
        (("metadata_version = 3.9-IV0", "metadata_version = 4.0-IV0"), "apache/kafka:3.9.1"),
        (("node_id = 2", "node_id = 3000"), "node ids"),
        (("external_port = 29092", "external_port = 19092"), "host ports"),
        (("port = 9093", "port = 70000"), "outside"),
        (("[broker.kafka41]", "[kafka41]"), "[broker.NAME]"),
        (("image = apache/kafka:4.1.0\n", ""), "image is missing"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(edit: tuple[str, str], message: str) -> None:
    old, new = edit
    assert old in SETTINGS_TEXT
    with pytest.raises(render.SettingsError, match=re.escape(message)):
        render.parse_settings(SETTINGS_TEXT.replace(old, new, 1))


def test_bad_settings_file_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "settings.ini"
    bad.write_text(SETTINGS_TEXT.replace("node_id = 2", "node_id = 1"), encoding="utf-8")
    out = tmp_path / "out"
    assert render.main(["--settings", str(bad), "--out", str(out)]) == 2
    assert not out.exists()
    assert "node ids" in capsys.readouterr().err


def test_a_template_naming_an_unknown_value_is_an_error(tmp_path: Path) -> None:
    templates = tmp_path / "config"
    shutil.copytree(DOCKER / "config", templates)
    path = templates / "server.properties.tmpl"
    path.write_text(path.read_text(encoding="utf-8") + "rack=${broker_rack}\n", encoding="utf-8")
    with pytest.raises(render.SettingsError, match="broker_rack"):
        render.render(_settings(), templates)


def test_a_third_broker_section_gets_its_own_service_config_and_volumes(tmp_path: Path) -> None:
    text = SETTINGS_TEXT + "\n[broker.extra]\nimage = apache/kafka:4.1.0\nnode_id = 7\nexternal_port = 39092\n"
    files = render.render(render.parse_settings(text))
    compose = yaml.safe_load(files["compose.yaml"])
    assert {"extra", "extra-storage"} <= set(compose["services"])
    assert {"extra-d1", "extra-d2"} <= set(compose["volumes"])
    props = parse_properties(files["generated/extra.properties"])
    assert props["node.id"] == "7" and props["listeners"].endswith(":39092")


# --------------------------------------------------------------------------- compose.yaml


def _named_volumes(service: dict[str, Any]) -> dict[str, str]:
    """target -> volume name, for the named (not bind-mounted) volumes of a service."""
    out = {}
    for entry in service.get("volumes", []):
        source, target = entry.split(":")[:2]
        if not source.startswith((".", "/")):
            out[target] = source
    return out


def _binds(service: dict[str, Any]) -> dict[str, str]:
    out = {}
    for entry in service.get("volumes", []):
        source, target = entry.split(":")[:2]
        if source.startswith((".", "/")):
            out[target] = source
    return out


@pytest.mark.parametrize("root", ["checked-in", "rendered"])
def test_compose_structure(root: str, rendered: Path) -> None:
    base = DOCKER if root == "checked-in" else rendered
    compose = _compose(base)
    settings = _settings()
    services = compose["services"]
    brokers = {b.service: b for b in settings.brokers}
    assert set(services) == {"controller"} | set(brokers) | {f"{n}-storage" for n in brokers}

    images = {brokers[n].image for n in brokers}
    assert any(i.startswith("apache/kafka:3.9") for i in images)
    assert any(re.match(r"apache/kafka:4\.\d", i) for i in images)

    ctrl = services["controller"]
    assert ctrl["build"] == {
        "context": "..",
        "dockerfile": "docker/Dockerfile",
        "args": {"CONTROLLER_PORT": str(settings.controller_port)},
    }
    assert (DOCKER / ".." / ctrl["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    cmd = ctrl["command"]
    assert cmd[cmd.index("--cluster-id") + 1] == settings.cluster_id
    assert cmd[cmd.index("--metadata-version") + 1] == settings.metadata_version
    assert ctrl["ports"] == [f"127.0.0.1:{settings.controller_host_port}:{settings.controller_port}"]
    assert _binds(ctrl) == {"/etc/kraft-jbod/controller.properties": "./generated/controller.properties"}
    assert _named_volumes(ctrl) == {"/var/lib/kraft-jbod": "controller-metadata"}

    declared = set(compose["volumes"])
    used: set[str] = set(_named_volumes(ctrl).values())
    for name, b in brokers.items():
        svc, init = services[name], services[f"{name}-storage"]
        assert svc["image"] == init["image"] == b.image
        vols = _named_volumes(svc)
        assert vols == {"/var/lib/kafka/d1": f"{name}-d1", "/var/lib/kafka/d2": f"{name}-d2"}
        assert len(set(vols.values())) == 2
        assert _named_volumes(init) == vols, "the format step must format the volumes the broker uses"
        used |= set(vols.values())
        config = f"./generated/{name}.properties"
        assert _binds(svc)["/etc/kraft-jbod/server.properties"] == config
        assert _binds(init)["/etc/kraft-jbod/server.properties"] == config
        assert (base / config).is_file()
        script = _binds(init)[init["entrypoint"][1]]
        assert (DOCKER / script).is_file() and init["entrypoint"][0] == "/bin/sh"
        assert init["command"] == [settings.cluster_id, settings.metadata_version]
        assert str(init["user"]).startswith("0")
        assert svc["depends_on"] == {
            "controller": {"condition": "service_healthy"},
            f"{name}-storage": {"condition": "service_completed_successfully"},
        }
        assert svc["ports"] == [f"{b.external_port}:{b.external_port}"]
        assert svc["entrypoint"] == ["/opt/kafka/bin/kafka-server-start.sh"]
        assert svc["command"] == ["/etc/kraft-jbod/server.properties"]
    assert used == declared
    for bind in _binds(ctrl).values():
        assert (base / bind).is_file()


# --------------------------------------------------------------------------- configs


def test_broker_configs_have_what_a_kraft_broker_needs(rendered: Path) -> None:
    settings = _settings()
    ctrl_props = _props(rendered / "generated" / "controller.properties")
    ctrl = controller_config.load(rendered / "generated" / "controller.properties")
    assert ctrl.node_id == settings.controller_id
    (ctrl_listener,) = ctrl.controller_listeners
    assert ctrl_listener.port == settings.controller_port
    assert ctrl.unknown == {}, "every controller key should be one our controller knows"
    assert ctrl.metadata_log_dir == Path("/var/lib/kraft-jbod/metadata")
    assert "controller" in ctrl_props["process.roles"]

    ids = set()
    for b in settings.brokers:
        p = _props(rendered / "generated" / f"{b.service}.properties")
        assert p["process.roles"] == "broker"
        assert int(p["node.id"]) == b.node_id
        ids.add(b.node_id)
        voters = p["controller.quorum.voters"].split(",")
        assert len(voters) == 1
        vid, _, endpoint = voters[0].partition("@")
        host, _, port = endpoint.rpartition(":")
        assert int(vid) == ctrl.node_id and int(port) == ctrl_listener.port and host == "controller"
        assert int(vid) != b.node_id
        assert p["controller.listener.names"] == "CONTROLLER"
        listeners = parse_listeners(p["listeners"])
        advertised = parse_listeners(p["advertised.listeners"], "advertised.listeners")
        names = {li.name for li in listeners}
        assert "CONTROLLER" not in names, "a broker-only node must not listen on the controller listener"
        assert names == {li.name for li in advertised}
        security = dict(item.split(":") for item in p["listener.security.protocol.map"].split(","))
        assert names | {"CONTROLLER"} <= set(security)
        assert p["inter.broker.listener.name"] in names
        internal = next(li for li in advertised if li.name == p["inter.broker.listener.name"])
        assert internal.host == b.service, "brokers reach each other by compose service name"
        external = next(li for li in advertised if li.name != p["inter.broker.listener.name"])
        assert (external.host, external.port) == ("localhost", b.external_port)
        dirs = [d for d in p["log.dirs"].split(",") if d]
        assert dirs == ["/var/lib/kafka/d1", "/var/lib/kafka/d2"]
        assert "metadata.log.dir" not in p or p["metadata.log.dir"] in dirs
        assert int(p["offsets.topic.replication.factor"]) <= len(settings.brokers)
        # Our own broker parser accepts it too (voters, listeners, storage layout).
        cfg = BrokerConfig.from_properties(p)
        assert len(cfg.layout.log_dirs) == 2 and cfg.voters[0].node_id == ctrl.node_id
    assert len(ids) == len(settings.brokers)
    assert level_of(settings.metadata_version) >= level_of("3.7-IV2")


# --------------------------------------------------------------------------- Dockerfile

_INSTRUCTIONS = {
    "ADD",
    "ARG",
    "CMD",
    "COPY",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
    "FROM",
    "HEALTHCHECK",
    "LABEL",
    "MAINTAINER",
    "ONBUILD",
    "RUN",
    "SHELL",
    "STOPSIGNAL",
    "USER",
    "VOLUME",
    "WORKDIR",
}


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction; backslash continuations joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comment lines inside a continuation are skipped by Docker
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        keyword, _, args = pending.partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation"
    return out


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def test_dockerfile_instructions() -> None:
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    instrs = parse_dockerfile(text)
    for keyword, _ in instrs:
        assert keyword in _INSTRUCTIONS, keyword
    by = {k: [a for kk, a in instrs if kk == k] for k in _INSTRUCTIONS}
    first = next(k for k, _ in instrs if k != "ARG")
    assert first == "FROM" and by["FROM"] == ["python:3.11-slim"]
    assert _exec_form(by["ENTRYPOINT"][-1]) == [
        "kraft-jbod",
        "controller",
        "--config",
        "/etc/kraft-jbod/controller.properties",
    ]
    assert _exec_form(by["CMD"][-1]) == []
    health = by["HEALTHCHECK"][-1]
    opts, _, cmd = health.partition("CMD ")
    assert all(o.startswith("--") for o in opts.split())
    probe = _exec_form(cmd)
    assert probe[0] == "python" and "create_connection" in probe[-1]
    assert by["USER"] and by["USER"][-1] != "root"
    # The exposed port, the healthcheck's port and compose's build arg are one value.
    assert by["EXPOSE"] == ["${CONTROLLER_PORT}"]
    assert "KRAFT_JBOD_PORT=${CONTROLLER_PORT}" in by["ENV"][0]
    assert any(a.startswith("CONTROLLER_PORT=") for a in by["ARG"])
    # Everything COPY takes from the context exists and is let through the ignore file.
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text(encoding="utf-8")
    for args in by["COPY"]:
        for src in args.split()[:-1]:
            assert (DOCKER.parent / src).exists(), src
            assert f"!{src}" in ignore.split(), src


def test_dockerfile_healthcheck_probe_detects_a_listener() -> None:
    """Run the healthcheck's own Python against a socket we open and one we closed."""
    import socket

    instrs = parse_dockerfile((DOCKER / "Dockerfile").read_text(encoding="utf-8"))
    health = next(a for k, a in instrs if k == "HEALTHCHECK")
    probe = _exec_form(health.partition("CMD ")[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        ok = subprocess.run([sys.executable, *probe[1:]], env={"KRAFT_JBOD_PORT": str(port)}, timeout=20)
    assert ok.returncode == 0
    bad = subprocess.run(
        [sys.executable, *probe[1:]], env={"KRAFT_JBOD_PORT": str(port)}, timeout=20, capture_output=True
    )
    assert bad.returncode != 0


# --------------------------------------------------------------------------- scripts


@pytest.mark.parametrize("script", ["fail-dir.sh", "format-storage.sh"])
def test_scripts_parse(script: str) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    result = subprocess.run([bash, "-n", str(DOCKER / script)], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0, result.stderr
    assert (DOCKER / script).stat().st_mode & 0o111, "scripts are executable"


def test_fail_dir_inner_script_parses_as_posix_sh() -> None:
    text = (DOCKER / "fail-dir.sh").read_text(encoding="utf-8")
    inner = text.split("<<'INNER'\n", 1)[1].split("\nINNER\n", 1)[0]
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    result = subprocess.run([sh, "-n"], input=inner, capture_output=True, text=True, timeout=20)
    assert result.returncode == 0, result.stderr


def test_fail_dir_usage_errors_without_docker(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(DOCKER / "fail-dir.sh"), "only-one-arg"], capture_output=True, text=True, timeout=20
    )
    assert result.returncode == 2 and "usage" in result.stderr


# --------------------------------------------------------------------------- live, on loopback


async def _wait(what: str, check: Any, seconds: float) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_our_controller_serves_a_rendered_broker_config(rendered: Path, tmp_path: Path) -> None:
    settings = _settings()
    ctrl_cfg = controller_config.load(
        rendered / "generated" / "controller.properties",
        ["listeners=CONTROLLER://127.0.0.1:0", f"metadata.log.dir={tmp_path / 'controller'}"],
    )
    controller = ControllerServer(
        ctrl_cfg, cluster_id=settings.cluster_id, metadata_version=level_of(settings.metadata_version), fsync=False
    )
    await controller.start()
    broker: FakeBroker | None = None
    try:
        port = controller.addresses[0][1]
        b = settings.brokers[0]
        props = _props(rendered / "generated" / f"{b.service}.properties")
        # Same file, moved to loopback: the voter's host, and each log dir under tmp_path.
        vid = props["controller.quorum.voters"].partition("@")[0]
        props["controller.quorum.voters"] = f"{vid}@127.0.0.1:{port}"
        props["log.dirs"] = ",".join(str(tmp_path / "broker" / Path(d).name) for d in props["log.dirs"].split(","))
        props["listeners"] = props["listeners"].replace("://:", "://127.0.0.1:")
        props["broker.heartbeat.interval.ms"] = "200"
        layout = StorageLayout.from_properties(props)
        format_storage(layout, settings.cluster_id)
        dir_ids = [read_meta_properties(d).directory_id for d in layout.log_dirs]  # type: ignore[union-attr]
        assert len(set(dir_ids)) == 2

        broker = FakeBroker(BrokerConfig.from_properties(props))
        await broker.start()
        fb = broker
        await _wait("registration", lambda: b.node_id in controller.state.brokers, 20)
        reg = controller.state.brokers[b.node_id]
        assert set(reg.registered_dirs) == set(dir_ids)
        assert all(isinstance(d, uuid.UUID) for d in reg.registered_dirs)
        await _wait("broker RUNNING", lambda: fb.lifecycle.state is State.RUNNING, 20)
        assert controller.cluster_id == settings.cluster_id
        assert controller.metadata_version == level_of(settings.metadata_version)
    finally:
        if broker is not None:
            await broker.close()
        await controller.close()
