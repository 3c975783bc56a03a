"""The docker/ stacks without Docker: CI has no engine, so these tests check what can be
checked here. Two clusters (Kafka 3.9 + 4.1 at 3.9-IV0, Kafka 4.4 at 4.3-IV0): each compose
file's structure and that both can run side by side; render.py's validation (a broker
release that cannot join its cluster's level is refused) and its level tables against the
controller's; the rendered broker and controller configs read with our own Kafka properties
parser, and the Kafka 4.4 ones with Kafka 4.4's own config definitions and storage
formatter (the oracle jar); the Dockerfile's instructions; the shell scripts' syntax; and,
for real, our controller started on each cluster's rendered controller.properties at the
cluster's level with our fake broker on a rendered broker config (moved to loopback)
registering its log directories, cordoned ones included."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
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
from kraft_jbod.controller import features
from kraft_jbod.controller.config import parse_listeners, parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.storage import StorageLayout, format_storage, read_meta_properties
from tests.oracles.kafka44 import require_kafka_oracle

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


def _compose(root: Path, cluster: Any) -> dict[str, Any]:
    data = yaml.safe_load((root / cluster.compose_file).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _props(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- render.py


def test_checked_in_files_match_the_settings() -> None:
    assert render.stale(DOCKER, render.render(_settings())) == []
    assert render.main(["--check"]) == 0


def test_two_clusters_each_with_its_own_project_files_and_level() -> None:
    settings = _settings()
    files = render.render(settings)
    by_name = {c.name: c for c in settings.clusters}
    assert set(by_name) == {"mixed", "kafka44"}
    mixed, k44 = by_name["mixed"], by_name["kafka44"]
    assert (mixed.metadata_version, mixed.level) == ("3.9-IV0", 21)
    assert (k44.metadata_version, k44.level) == ("4.3-IV0", 30)
    assert {render.release_of_image(b.image) for b in mixed.brokers} == {"3.9", "4.1"}
    assert {render.release_of_image(b.image) for b in k44.brokers} == {"4.4"}
    assert all(len(b.log_dirs) >= 2 for b in k44.brokers)
    assert any(b.cordoned for b in k44.brokers), "one Kafka 4.4 broker shows KIP-1066 cordoning"
    assert mixed.project != k44.project and mixed.cluster_id != k44.cluster_id
    for c in settings.clusters:
        expected = {c.compose_file, f"generated/{c.name}/controller.properties"}
        expected |= {f"generated/{c.name}/{b.service}.properties" for b in c.brokers}
        assert expected <= set(files)
    assert len(files) == sum(2 + len(c.brokers) for c in settings.clusters)


def test_level_tables_agree_with_the_controller() -> None:
    """render.py cannot import kraft_jbod (it runs on a bare Python); its copy of Kafka's
    levels must be the controller's."""
    levels = list(render.JBOD_LEVELS.values())
    assert levels == list(range(features.MV_3_7_IV2, features.LATEST_PRODUCTION_LEVEL + 1))
    for name, level in render.JBOD_LEVELS.items():
        assert features.level_of(name) == level and features.name_of(level) == name
    for release, newest in render.RELEASE_MAX_LEVEL.items():
        assert newest in levels
        # A release's newest production level belongs to that release or (4.4) an older one.
        assert tuple(map(int, features.release_of(newest).split("."))) <= tuple(map(int, release.split(".")))
    assert render.RELEASE_MAX_LEVEL["3.9"] == features.MV_3_9_IV0
    assert render.RELEASE_MAX_LEVEL["4.4"] == features.LATEST_PRODUCTION_LEVEL
    assert render.CORDON_MIN_LEVEL == features.MV_4_3_IV0
    for c in _settings().clusters:
        assert features.MV_3_7_IV2 <= c.level <= features.MAX_SUPPORTED_LEVEL


def test_check_reports_an_edited_a_missing_and_a_leftover_file(rendered: Path) -> None:
    assert render.main(["--out", str(rendered), "--check"]) == 0
    target = rendered / "generated" / "kafka44" / "controller.properties"
    target.write_text(target.read_text(encoding="utf-8") + "node.id=1\n", encoding="utf-8")
    assert render.main(["--out", str(rendered), "--check"]) == 1
    (rendered / "compose-mixed.yaml").unlink()
    # A file of a broker or cluster no longer in the settings (here: the layout before
    # there were two clusters) is stale too; a file render.py did not write is not ours.
    leftover = rendered / "generated" / "kafka39.properties"
    leftover.write_text("# Rendered by docker/render.py from docker/settings.ini\n", encoding="utf-8")
    (rendered / "generated" / "notes.txt").write_text("mine\n", encoding="utf-8")
    files = render.render(_settings())
    assert render.stale(rendered, files) == [
        "compose-mixed.yaml",
        "generated/kafka44/controller.properties",
        "generated/kafka39.properties",
    ]
    assert render.main(["--out", str(rendered)]) == 0
    assert render.stale(rendered, files) == []
    assert not leftover.exists() and (rendered / "generated" / "notes.txt").exists()


def _moved(broker: str, cluster: str) -> str:
    """SETTINGS_TEXT with [broker.BROKER] moved into another cluster (as node 9)."""
    head, _, rest = SETTINGS_TEXT.partition(f"[broker.{broker}]\n")
    rest = re.sub(r"\Acluster = \S+\n", f"cluster = {cluster}\n", rest)
    rest = re.sub(r"^node_id = \d+$", "node_id = 9", rest, count=1, flags=re.MULTILINE)
    return f"{head}[broker.{broker}]\n{rest}"


def test_a_39_broker_is_refused_in_the_level_30_cluster() -> None:
    with pytest.raises(render.SettingsError) as err:
        render.parse_settings(_moved("kafka39", "kafka44"))
    message = str(err.value)
    assert "broker.kafka39" in message and "apache/kafka:3.9.1" in message
    assert "cannot join" in message and "4.3-IV0 (level 30)" in message and "3.9-IV0 (level 21)" in message
    # 4.1 stops at 4.1-IV1 (27): it cannot join either; a 4.4 broker can join the 3.9 cluster.
    with pytest.raises(render.SettingsError, match=re.escape("4.1-IV1 (level 27)")):
        render.parse_settings(_moved("kafka41", "kafka44"))
    joined = render.parse_settings(_moved("kafka44a", "mixed"))
    assert "kafka44a" in {b.service for b in joined.cluster("mixed").brokers}


@pytest.mark.parametrize(
    ("release", "newest"),
    [("3.7.2", "3.7-IV4"), ("3.8.1", "3.8-IV0"), ("4.0.0", "4.0-IV3"), ("4.2.0", "4.2-IV1"), ("4.3.1", "4.3-IV0")],
)
def test_each_release_joins_up_to_its_newest_level_and_no_further(release: str, newest: str) -> None:
    image = f"apache/kafka:{release}"
    render.check_release_joins(image, newest, "broker.x")
    above = [n for n, lvl in render.JBOD_LEVELS.items() if lvl == render.JBOD_LEVELS[newest] + 1]
    for name in above:
        with pytest.raises(render.SettingsError, match="cannot join"):
            render.check_release_joins(image, name, "broker.x")
    render.check_release_joins("registry.local/kafka:custom", "4.3-IV0", "broker.x")  # not a version: unchecked


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("S2pCb0RvY2tlckpib2QwMQ", "not-a-uuid"), "cluster_id"),
        (("S2pCb0RvY2tlckpib2QwMQ", "S2pCb0RvY2tlckpib2QwMR"), "16 bytes"),  # stray bits past 128
        (("S3JhZnRKYm9kS2Fma2E0NA", "S2pCb0RvY2tlckpib2QwMQ"), "cluster ids"),
        (("metadata_version = 3.9-IV0", "metadata_version = 3.6-IV2"), "JBOD"),
        (("metadata_version = 3.9-IV0", "metadata_version = 4.0-IV0"), "apache/kafka:3.9.1"),
        (("metadata_version = 4.3-IV0", "metadata_version = 4.4-IV0"), "JBOD needs one of"),
        (("metadata_version = 4.3-IV0", "metadata_version = 4.2-IV1"), "4.3-IV0 (level 30) or later"),
        (("node_id = 2\nexternal_port = 29092", "node_id = 3000\nexternal_port = 29092"), "node ids"),
        (("node_id = 2\nexternal_port = 29092", "node_id = 1\nexternal_port = 29092"), "node ids"),
        (("external_port = 29092", "external_port = 19092"), "host ports"),
        (("external_port = 39092", "external_port = 19092"), "across all clusters"),
        (("controller_host_port = 9193", "controller_host_port = 9093"), "across all clusters"),
        (("port = 9093", "port = 70000"), "outside"),
        (("[broker.kafka41]", "[kafka41]"), "[broker.NAME]"),
        (("image = apache/kafka:4.1.0\n", ""), "image is missing"),
        (("image = apache/kafka:4.1.0", "image = apache/kafka:3.6.2"), "no KRaft JBOD"),
        (("image = apache/kafka:4.1.0", "image = apache/kafka:5.0.0"), "RELEASE_MAX_LEVEL"),
        (("cluster = mixed\nimage = apache/kafka:4.1.0", "cluster = nowhere\nimage = apache/kafka:4.1.0"), "nowhere"),
        (("cordoned_log_dirs = d3", "cordoned_log_dirs = d4"), "not one of its log dirs"),
        (("cordoned_log_dirs = d3", "cordoned_log_dirs = d3,d3"), "twice"),
        (("cordoned_log_dirs = d3", "cordoned = d3"), "unknown keys"),
        (("log_dirs = 3", "log_dirs = 1"), "outside 2..9"),
        (("external_port = 29092\n", "external_port = 29092\ncordoned_log_dirs = d2\n"), "Kafka 4.1 has no cordoned"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(edit: tuple[str, str], message: str) -> None:
    old, new = edit
    assert old in SETTINGS_TEXT
    with pytest.raises(render.SettingsError, match=re.escape(message)):
        render.parse_settings(SETTINGS_TEXT.replace(old, new, 1))


def test_a_cluster_without_brokers_is_refused() -> None:
    text = SETTINGS_TEXT + "\n[cluster.empty]\ncluster_id = AAAAAAAAAAAAAAAAAAAAAA\nmetadata_version = 3.9-IV0\n"
    with pytest.raises(render.SettingsError, match=r"\[cluster.empty\] has no broker"):
        render.parse_settings(text + "controller_host_port = 0\n")


def test_bad_settings_file_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "settings.ini"
    bad.write_text(_moved("kafka39", "kafka44"), encoding="utf-8")
    out = tmp_path / "out"
    assert render.main(["--settings", str(bad), "--out", str(out)]) == 2
    assert not out.exists()
    assert "cannot join" in capsys.readouterr().err


def test_a_template_naming_an_unknown_value_is_an_error(tmp_path: Path) -> None:
    templates = tmp_path / "config"
    shutil.copytree(DOCKER / "config", templates)
    path = templates / "server.properties.tmpl"
    path.write_text(path.read_text(encoding="utf-8") + "rack=${broker_rack}\n", encoding="utf-8")
    with pytest.raises(render.SettingsError, match="broker_rack"):
        render.render(_settings(), templates)


def test_another_broker_section_gets_its_own_service_config_and_volumes() -> None:
    extra = "\n[broker.extra]\ncluster = kafka44\nimage = apache/kafka:4.4.0\nnode_id = 7\nexternal_port = 59092\n"
    files = render.render(render.parse_settings(SETTINGS_TEXT + extra + "log_dirs = 4\ncordoned_log_dirs = *\n"))
    compose = yaml.safe_load(files["compose-kafka44.yaml"])
    assert {"extra", "extra-storage"} <= set(compose["services"])
    assert {"extra-d1", "extra-d2", "extra-d3", "extra-d4"} <= set(compose["volumes"])
    assert "extra" not in yaml.safe_load(files["compose-mixed.yaml"])["services"]
    props = parse_properties(files["generated/kafka44/extra.properties"])
    assert props["node.id"] == "7" and props["listeners"].endswith(":59092")
    assert props["log.dirs"].split(",") == [f"/var/lib/kafka/d{i}" for i in range(1, 5)]
    assert props["cordoned.log.dirs"] == "*"


# --------------------------------------------------------------------------- compose files


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


def _host_port(mapping: str) -> int:
    """The host side of a compose ports entry ("[ip:]host:container")."""
    return int(mapping.split(":")[-2])


@pytest.mark.parametrize("root", ["checked-in", "rendered"])
@pytest.mark.parametrize("cluster_name", ["mixed", "kafka44"])
def test_compose_structure(root: str, cluster_name: str, rendered: Path) -> None:
    base = DOCKER if root == "checked-in" else rendered
    settings = _settings()
    cluster = settings.cluster(cluster_name)
    compose = _compose(base, cluster)
    assert compose["name"] == cluster.project == f"kraft-jbod-{cluster_name}"
    services = compose["services"]
    brokers = {b.service: b for b in cluster.brokers}
    assert set(services) == {"controller"} | set(brokers) | {f"{n}-storage" for n in brokers}

    ctrl = services["controller"]
    assert ctrl["build"] == {
        "context": "..",
        "dockerfile": "docker/Dockerfile",
        "args": {"CONTROLLER_PORT": str(settings.controller_port)},
    }
    assert (DOCKER / ".." / ctrl["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    cmd = ctrl["command"]
    assert cmd[cmd.index("--cluster-id") + 1] == cluster.cluster_id
    assert cmd[cmd.index("--metadata-version") + 1] == cluster.metadata_version
    assert features.level_of(cluster.metadata_version) == cluster.level
    assert ctrl["ports"] == [f"127.0.0.1:{cluster.controller_host_port}:{settings.controller_port}"]
    config = f"./generated/{cluster_name}/controller.properties"
    assert _binds(ctrl) == {"/etc/kraft-jbod/controller.properties": config}
    assert _named_volumes(ctrl) == {"/var/lib/kraft-jbod": "controller-metadata"}

    declared = set(compose["volumes"])
    used: set[str] = set(_named_volumes(ctrl).values())
    for name, b in brokers.items():
        svc, init = services[name], services[f"{name}-storage"]
        assert svc["image"] == init["image"] == b.image
        vols = _named_volumes(svc)
        assert vols == {f"/var/lib/kafka/{d}": f"{name}-{d}" for d in b.dir_names}
        assert len(set(vols.values())) == len(b.dir_names) >= 2
        assert _named_volumes(init) == vols, "the format step must format the volumes the broker uses"
        used |= set(vols.values())
        config = f"./generated/{cluster_name}/{name}.properties"
        assert _binds(svc)["/etc/kraft-jbod/server.properties"] == config
        assert _binds(init)["/etc/kraft-jbod/server.properties"] == config
        assert (base / config).is_file()
        assert sorted(_props(base / config)["log.dirs"].split(",")) == sorted(vols)
        script = _binds(init)[init["entrypoint"][1]]
        assert (DOCKER / script).is_file() and init["entrypoint"][0] == "/bin/sh"
        assert init["command"] == [cluster.cluster_id, cluster.metadata_version]
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


def test_the_clusters_can_run_side_by_side() -> None:
    """Distinct project names (so distinct containers, networks and volumes) and no host
    port published twice, read from the checked-in compose files themselves."""
    settings = _settings()
    projects, host_ports = [], []
    for cluster in settings.clusters:
        compose = _compose(DOCKER, cluster)
        projects.append(compose["name"])
        for service in compose["services"].values():
            host_ports += [_host_port(p) for p in service.get("ports", [])]
    assert len(set(projects)) == len(projects) == 2
    assert len(host_ports) == len(settings.brokers) + len(settings.clusters)
    assert len(set(host_ports)) == len(host_ports), host_ports
    compose_files = sorted(p.name for p in DOCKER.glob("compose*.yaml"))
    assert compose_files == sorted(c.compose_file for c in settings.clusters)


# --------------------------------------------------------------------------- configs


@pytest.mark.parametrize("cluster_name", ["mixed", "kafka44"])
def test_broker_configs_have_what_a_kraft_broker_needs(cluster_name: str, rendered: Path) -> None:
    settings = _settings()
    cluster = settings.cluster(cluster_name)
    gen = rendered / "generated" / cluster_name
    ctrl_props = _props(gen / "controller.properties")
    ctrl = controller_config.load(gen / "controller.properties")
    assert ctrl.node_id == settings.controller_id
    (ctrl_listener,) = ctrl.controller_listeners
    assert ctrl_listener.port == settings.controller_port
    assert ctrl.unknown == {}, "every controller key should be one our controller knows"
    assert ctrl.metadata_log_dir == Path("/var/lib/kraft-jbod/metadata")
    assert "controller" in ctrl_props["process.roles"]

    ids = set()
    for b in cluster.brokers:
        p = _props(gen / f"{b.service}.properties")
        assert p["process.roles"] == "broker"
        assert int(p["node.id"]) == b.node_id
        ids.add(b.node_id)
        # Static voters: the mock is the single voter of a kraft.version 0 quorum.
        assert "controller.quorum.bootstrap.servers" not in p
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
        assert dirs == [f"/var/lib/kafka/d{i}" for i in range(1, len(b.dir_names) + 1)] and len(dirs) >= 2
        assert "metadata.log.dir" not in p or p["metadata.log.dir"] in dirs
        assert int(p["offsets.topic.replication.factor"]) <= len(cluster.brokers)
        if b.cordoned:
            assert cluster.level >= features.MV_4_3_IV0
            assert set(p["cordoned.log.dirs"].split(",")) < set(dirs), "cordon some dirs, not all"
        else:
            assert "cordoned.log.dirs" not in p
        # Our own broker parser accepts it too (voters, listeners, storage layout, cordoning
        # by Kafka's rules: each cordoned dir one of log.dirs).
        cfg = BrokerConfig.from_properties(p)
        assert len(cfg.layout.log_dirs) == len(dirs) and cfg.voters[0].node_id == ctrl.node_id
        assert [str(d) for d in cfg.cordoned_log_dirs] == [d for d in p.get("cordoned.log.dirs", "").split(",") if d]
    assert len(ids) == len(cluster.brokers)


_KAFKA_CHECK = """
import java.io.FileReader;
import java.io.Reader;
import java.util.Arrays;
import java.util.Properties;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.metadata.storage.Formatter;
import org.apache.kafka.server.common.MetadataVersion;
import org.apache.kafka.server.config.AbstractKafkaConfig;

// Kafka 4.4 judges a rendered broker config: every key one of its broker config definitions
// (AbstractKafkaConfig.CONFIG_DEF, what KafkaConfig is built on), every value accepted by
// them, and its storage formatter (what kafka-storage.sh format runs) writing meta.properties
// into the log dirs at the cluster's release version.
// args: (PROPERTIES CLUSTER_ID RELEASE_VERSION)...
//   or: format --ignore-formatted --cluster-id ID --release-version MV --config PROPERTIES,
//       the kafka-storage.sh command line format-storage.sh runs (a stand-in for it).
public class DockerConfigCheck {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("format")) {
            storageFormat(args);
            return;
        }
        ConfigDef def = AbstractKafkaConfig.CONFIG_DEF;
        System.out.println("LATEST_PRODUCTION " + MetadataVersion.LATEST_PRODUCTION.featureLevel());
        for (int i = 0; i + 2 < args.length; i += 3) {
            System.out.println("BROKER " + args[i]);
            Properties props = new Properties();
            try (Reader r = new FileReader(args[i])) {
                props.load(r);
            }
            for (String name : props.stringPropertyNames()) {
                if (!def.names().contains(name)) System.out.println("UNKNOWN " + name);
            }
            try {
                def.parse(props);
                System.out.println("PARSED");
                MetadataVersion mv = MetadataVersion.fromVersionString(args[i + 2], false);
                System.out.println("RELEASE " + mv.featureLevel());
                format(props, args[i + 1], mv);
                System.out.println("FORMATTED");
            } catch (Exception e) {
                System.out.println("ERROR " + e);
            }
        }
    }

    static void format(Properties props, String clusterId, MetadataVersion mv) throws Exception {
        String[] dirs = props.getProperty("log.dirs").split(",");
        new Formatter()
            .setPrintStream(System.err)
            .setNodeId(Integer.parseInt(props.getProperty("node.id")))
            .setClusterId(clusterId)
            .setReleaseVersion(mv)
            .setControllerListenerName(props.getProperty("controller.listener.names").split(",")[0])
            .setMetadataLogDirectory(props.getProperty("metadata.log.dir", dirs[0]))
            .setDirectories(Arrays.asList(dirs))
            .setIgnoreFormatted(true)
            .setWriteBootstrapSnapshot(false)
            .run();
    }

    static void storageFormat(String[] args) throws Exception {
        String clusterId = null, release = null, config = null;
        boolean ignoreFormatted = false;
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--ignore-formatted": ignoreFormatted = true; break;
                case "--cluster-id": clusterId = args[++i]; break;
                case "--release-version": release = args[++i]; break;
                case "--config": config = args[++i]; break;
                default: throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
        }
        if (clusterId == null || release == null || config == null || !ignoreFormatted) {
            throw new IllegalArgumentException("format-storage.sh must pass all four options");
        }
        Properties props = new Properties();
        try (Reader r = new FileReader(config)) {
            props.load(r);
        }
        format(props, clusterId, MetadataVersion.fromVersionString(release, false));
    }
}
"""


def _jdk(tool: str) -> str:
    home = os.environ.get("JAVA_HOME")
    path = str(Path(home) / "bin" / tool) if home else shutil.which(tool)
    assert path, f"the Kafka oracle is built, so a JDK ({tool}) is on PATH or JAVA_HOME"
    return path


@pytest.fixture(scope="module")
def kafka_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command running DockerConfigCheck on Kafka 4.4's classes, compiled once."""
    oracle = require_kafka_oracle()
    out = tmp_path_factory.mktemp("docker-java")
    source = out / "DockerConfigCheck.java"
    source.write_text(_KAFKA_CHECK, encoding="utf-8")
    compiled = subprocess.run(
        [_jdk("javac"), "-d", str(out), "-cp", oracle.classpath_string(), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    return [_jdk("java"), "-cp", os.pathsep.join([str(out), oracle.classpath_string()]), "DockerConfigCheck"]


def _moved_to(props_text: str, root: Path) -> str:
    """The same properties with the container's /var/lib/kafka under ``root``."""
    return props_text.replace("/var/lib/kafka/", f"{root}/")


def test_broker_configs_are_valid_for_kafka_44_and_its_formatter(kafka_check: list[str], tmp_path: Path) -> None:
    """Kafka 4.4's own config definitions and storage formatter (the oracle jar) on every
    rendered broker config: the 4.4 brokers' keys must all be 4.4 broker configs (nothing
    removed in 4.0, cordoned.log.dirs spelled as 4.4 spells it); the format step must
    leave meta.properties v1 with a directory.id in each log dir, kept on a rerun."""
    settings = _settings()
    args: list[str] = []
    brokers = {}
    for b in settings.brokers:
        cluster = settings.cluster(b.cluster)
        text = (DOCKER / cluster.generated / f"{b.service}.properties").read_text(encoding="utf-8")
        path = tmp_path / f"{b.service}.properties"
        path.write_text(_moved_to(text, tmp_path / b.service), encoding="utf-8")
        args += [str(path), cluster.cluster_id, cluster.metadata_version]
        brokers[str(path)] = (b, cluster)

    def run() -> dict[str, list[str]]:
        result = subprocess.run(
            [*kafka_check, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        lines = result.stdout.splitlines()
        assert lines[0] == f"LATEST_PRODUCTION {render.RELEASE_MAX_LEVEL['4.4']}"
        out: dict[str, list[str]] = {}
        current = ""
        for line in lines[1:]:
            if line.startswith("BROKER "):
                current = line.removeprefix("BROKER ")
                out[current] = []
            else:
                out[current].append(line)
        return out

    first = run()
    assert set(first) == set(brokers)
    ids_before = {}
    for config_path, report in first.items():
        b, cluster = brokers[config_path]
        unknown = [line for line in report if line.startswith("UNKNOWN ")]
        if render.release_of_image(b.image) == "4.4":
            assert unknown == [], f"{b.service}: not Kafka 4.4 broker configs: {unknown}"
        assert [line for line in report if not line.startswith("UNKNOWN ")] == [
            "PARSED",
            f"RELEASE {cluster.level}",
            "FORMATTED",
        ], f"{b.service}: {report}"
        for d in b.dir_names:
            meta = read_meta_properties(tmp_path / b.service / d)
            assert meta is not None, f"{b.service}/{d} has no meta.properties"
            assert meta.version == 1 and meta.cluster_id == cluster.cluster_id and meta.node_id == b.node_id
            assert meta.directory_id is not None
            ids_before[(b.service, d)] = meta.directory_id
    for b in settings.brokers:
        own = [ids_before[(b.service, d)] for d in b.dir_names]
        assert len(set(own)) == len(own), f"{b.service}: each log dir gets its own directory.id"
    # --ignore-formatted: a rerun of the format step keeps every directory id.
    run()
    for (service, d), before in ids_before.items():
        meta = read_meta_properties(tmp_path / service / d)
        assert meta is not None and meta.directory_id == before


@pytest.mark.parametrize("service", ["kafka39", "kafka44b"])
def test_format_storage_script_formats_every_log_dir(service: str, kafka_check: list[str], tmp_path: Path) -> None:
    """format-storage.sh itself, outside a container, with Kafka 4.4's storage formatter
    standing in for kafka-storage.sh: meta.properties v1 with its own directory.id in each of
    the broker's log dirs, handed to the owner of the Kafka home, kept on a rerun."""
    settings = _settings()
    b = next(b for b in settings.brokers if b.service == service)
    cluster = settings.cluster(b.cluster)
    home = tmp_path / "kafka"
    (home / "bin").mkdir(parents=True)
    stand_in = home / "bin" / "kafka-storage.sh"
    stand_in.write_text("#!/bin/sh\nexec " + " ".join(f'"{a}"' for a in kafka_check) + ' "$@"\n', encoding="utf-8")
    stand_in.chmod(0o755)
    config = tmp_path / "server.properties"
    text = (DOCKER / cluster.generated / f"{service}.properties").read_text(encoding="utf-8")
    config.write_text(_moved_to(text, tmp_path / "data"), encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "KRAFT_JBOD_KAFKA_HOME": str(home),
        "KRAFT_JBOD_SERVER_CONFIG": str(config),
    }
    command = ["sh", str(DOCKER / "format-storage.sh"), cluster.cluster_id, cluster.metadata_version]

    def run() -> dict[str, Any]:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        metas = {}
        for d in b.dir_names:
            path = tmp_path / "data" / d
            assert f"== {path}/meta.properties" in result.stdout
            meta = read_meta_properties(path)
            assert meta is not None
            assert (meta.version, meta.cluster_id, meta.node_id) == (1, cluster.cluster_id, b.node_id)
            assert path.stat().st_uid == home.stat().st_uid
            metas[d] = meta.directory_id
        return metas

    first = run()
    assert len(set(first.values())) == len(b.dir_names) and None not in first.values()
    assert run() == first
    bad = subprocess.run(command[:3], env=env, capture_output=True, text=True, timeout=20)
    assert bad.returncode == 2 and "usage" in bad.stderr


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


@pytest.mark.parametrize(("cluster_name", "service"), [("mixed", "kafka39"), ("kafka44", "kafka44b")])
async def test_our_controller_serves_a_rendered_broker_config(
    cluster_name: str, service: str, rendered: Path, tmp_path: Path
) -> None:
    settings = _settings()
    cluster = settings.cluster(cluster_name)
    gen = rendered / cluster.generated
    ctrl_cfg = controller_config.load(
        gen / "controller.properties",
        ["listeners=CONTROLLER://127.0.0.1:0", f"metadata.log.dir={tmp_path / 'controller'}"],
    )
    # The level the compose file's --metadata-version gives the controller.
    level = features.level_of(cluster.metadata_version)
    controller = ControllerServer(ctrl_cfg, cluster_id=cluster.cluster_id, metadata_version=level, fsync=False)
    await controller.start()
    broker: FakeBroker | None = None
    try:
        port = controller.addresses[0][1]
        b = next(b for b in cluster.brokers if b.service == service)
        props = _props(gen / f"{b.service}.properties")
        # Same file, moved to loopback: the voter's host, and each log dir under tmp_path.
        vid = props["controller.quorum.voters"].partition("@")[0]
        props["controller.quorum.voters"] = f"{vid}@127.0.0.1:{port}"
        for key in ("log.dirs", "cordoned.log.dirs"):
            if key in props:
                props[key] = _moved_to(props[key], tmp_path / "broker")
        props["listeners"] = props["listeners"].replace("://:", "://127.0.0.1:")
        props["broker.heartbeat.interval.ms"] = "200"
        layout = StorageLayout.from_properties(props)
        format_storage(layout, cluster.cluster_id)
        dir_ids = {d.name: read_meta_properties(d).directory_id for d in layout.log_dirs}  # type: ignore[union-attr]
        assert len(set(dir_ids.values())) == len(b.dir_names) >= 2

        broker = FakeBroker(BrokerConfig.from_properties(props))
        await broker.start()
        fb = broker
        await _wait("registration", lambda: b.node_id in controller.state.brokers, 20)
        reg = controller.state.brokers[b.node_id]
        assert set(reg.registered_dirs) == set(dir_ids.values())
        assert all(isinstance(d, uuid.UUID) for d in reg.registered_dirs)
        await _wait("broker RUNNING", lambda: fb.lifecycle.state is State.RUNNING, 20)
        assert controller.cluster_id == cluster.cluster_id
        assert controller.metadata_version == level == cluster.level
        if b.cordoned:
            # KIP-1066 at 4.3-IV0: the cordoned dir reaches the controller's registration.
            want = {dir_ids[d] for d in b.cordoned}
            await _wait(
                "cordoned dirs recorded",
                lambda: set(controller.state.brokers[b.node_id].cordoned_dirs or ()) == want,
                20,
            )
    finally:
        if broker is not None:
            await broker.close()
        await controller.close()
