"""The oracle locator's contract, without a JVM: skip with directions, fail under CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import kafka_oracle


def test_missing_source_package_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(kafka_oracle.ENV_ORACLE, raising=False)
    monkeypatch.setenv(kafka_oracle.ENV_SOURCE, str(tmp_path / "nowhere"))
    with pytest.raises(kafka_oracle.OracleUnavailable) as info:
        kafka_oracle.build(out=tmp_path / "out")
    assert "../shared/kafka/" in str(info.value) and kafka_oracle.ENV_ORACLE in str(info.value)


@pytest.mark.parametrize(("ci", "code"), [("", 0), ("true", 1)])
def test_make_target_exit_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, code: int) -> None:
    monkeypatch.delenv(kafka_oracle.ENV_ORACLE, raising=False)
    monkeypatch.setenv(kafka_oracle.ENV_SOURCE, str(tmp_path / "nowhere"))
    monkeypatch.setenv("CI", ci)
    assert kafka_oracle.main(["build", "-o", str(tmp_path / "out")]) == code


def test_override_must_hold_a_built_oracle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(kafka_oracle.ENV_ORACLE, str(tmp_path))
    with pytest.raises(kafka_oracle.OracleUnavailable, match="no classpath file"):
        kafka_oracle.locate()
    jar = tmp_path / "k.jar"
    jar.write_bytes(b"")
    (tmp_path / "classpath").write_text(f"{jar}:{tmp_path / 'missing.jar'}\n")
    with pytest.raises(kafka_oracle.OracleUnavailable, match=r"missing\.jar"):
        kafka_oracle.locate()
    (tmp_path / "classpath").write_text(f"{jar}\n")
    assert kafka_oracle.locate().jar == jar
