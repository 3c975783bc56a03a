"""meta.properties: Kafka's exact file shape, format/keep/refuse rules, the CLI."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from kraft_jbod import cli
from kraft_jbod.errors import StorageError
from kraft_jbod.storage import (
    StorageLayout,
    ensure_directory_ids,
    format_storage,
    parse_meta_properties,
    read_meta_properties,
)
from kraft_jbod.wire.primitives import is_reserved_directory_id, uuid_from_base64url

CLUSTER = "41QSStLtR3qOekbX4ZlbHA"


def layout(tmp_path: Path) -> StorageLayout:
    return StorageLayout.from_properties(
        {"node.id": "8", "log.dirs": f"{tmp_path / 'd1'},{tmp_path / 'd2'}", "metadata.log.dir": str(tmp_path / "meta")}
    )


def test_format_writes_kafkas_shape_in_every_dir(tmp_path: Path) -> None:
    results = format_storage(layout(tmp_path), CLUSTER, now=0)
    assert [r.path.name for r in results] == ["d1", "d2", "meta"]
    ids = set()
    for r in results:
        text = (r.path / "meta.properties").read_text()
        lines = text.splitlines()
        assert lines[0] == "#"
        assert re.fullmatch(r"#\w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC \d{4}", lines[1]), lines[1]
        keys = [line.split("=", 1)[0] for line in lines[2:]]
        assert keys == ["node.id", "version", "cluster.id", "directory.id"]
        meta = parse_meta_properties(text)
        assert (meta.version, meta.cluster_id, meta.node_id) == (1, CLUSTER, 8)
        assert meta.directory_id is not None and not is_reserved_directory_id(meta.directory_id)
        ids.add(meta.directory_id)
    assert len(ids) == 3


def test_reads_kafkas_own_file_and_keeps_ids(tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    d1.mkdir()
    # As kafka-storage writes it (KIP-858 example), with a comment date in Java's format.
    (d1 / "meta.properties").write_text(
        "#\n#Tue Oct 29 10:01:02 UTC 2024\nnode.id=8\nversion=1\ncluster.id=41QSStLtR3qOekbX4ZlbHA\n"
        "directory.id=e6umYSUsQyq7jUUzL9iXMQ\n"
    )
    results = format_storage(layout(tmp_path), CLUSTER)
    assert results[0].action == "kept"
    assert results[0].meta.directory_id == uuid_from_base64url("e6umYSUsQyq7jUUzL9iXMQ")
    again = format_storage(layout(tmp_path), CLUSTER)
    assert [r.action for r in again] == ["kept"] * 3
    assert [r.meta.directory_id for r in again] == [r.meta.directory_id for r in results]


def test_missing_directory_id_is_added_and_new_dir_formatted_on_startup(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    format_storage(lay, CLUSTER)
    text = (tmp_path / "d1" / "meta.properties").read_text()
    (tmp_path / "d1" / "meta.properties").write_text("\n".join(x for x in text.splitlines() if "directory.id" not in x))
    (tmp_path / "d2" / "meta.properties").unlink()
    results = {r.path.name: r for r in ensure_directory_ids(lay)}
    assert results["d1"].action == "added directory.id"
    assert results["d2"].action == "formatted"
    assert results["meta"].action == "kept"
    assert read_meta_properties(tmp_path / "d1").directory_id == results["d1"].meta.directory_id  # type: ignore[union-attr]


def test_duplicate_ids_refused_and_nothing_written(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    format_storage(lay, CLUSTER)
    copied = (tmp_path / "d1" / "meta.properties").read_text()
    (tmp_path / "d2" / "meta.properties").write_text(copied)
    before = (tmp_path / "meta" / "meta.properties").read_text()
    with pytest.raises(StorageError, match=r"same directory\.id"):
        format_storage(lay, CLUSTER)
    with pytest.raises(StorageError, match=r"same directory\.id"):
        ensure_directory_ids(lay)
    assert (tmp_path / "meta" / "meta.properties").read_text() == before


def test_other_cluster_or_node_refused(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    format_storage(lay, CLUSTER)
    with pytest.raises(StorageError, match="cluster"):
        format_storage(lay, "MkU3OEVBNTcwNTJENDM2Qg")
    other = StorageLayout.from_properties({"node.id": "9", "log.dirs": str(tmp_path / "d1")})
    with pytest.raises(StorageError, match="node"):
        format_storage(other, CLUSTER)


@pytest.mark.parametrize(
    "text",
    [
        "version=1\ncluster.id=x\n",  # no node.id
        "version=2\nnode.id=1\ncluster.id=x\n",
        "version=1\nnode.id=1\ncluster.id=x\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n",  # reserved (UNASSIGNED)
        "version=1\nnode.id=1\ncluster.id=x\ndirectory.id=short\n",
    ],
)
def test_bad_files_are_refused(text: str) -> None:
    with pytest.raises(StorageError):
        parse_meta_properties(text)


def test_cli_format_and_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(f"process.roles=broker\nnode.id=8\nlog.dirs={tmp_path / 'a'},{tmp_path / 'b'}\n")
    assert cli.main(["storage", "info", "-c", str(conf)]) == 1  # nothing formatted yet
    capsys.readouterr()
    assert cli.main(["storage", "format", "-c", str(conf), "--cluster-id", CLUSTER]) == 0
    out = capsys.readouterr().out
    assert out.count("formatted") == 2
    assert cli.main(["storage", "info", "-c", str(conf)]) == 0
    rows = capsys.readouterr().out.splitlines()
    ids = {re.search(r'"directory_id": "([^"]+)"', r)[1] for r in rows}  # type: ignore[index]
    assert len(ids) == 2 and all(isinstance(uuid_from_base64url(i), uuid.UUID) for i in ids)
    assert cli.main(["storage", "format", "-c", str(conf), "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg"]) == 2
