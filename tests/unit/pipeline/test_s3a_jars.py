"""An s3:// lake without hadoop-aws anywhere Spark looks is refused with what to run, before a JVM starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.pipeline import spark as S
from backend.store.location import parse_lake

REPO = Path(__file__).resolve().parents[3]


def test_an_s3_lake_without_the_s3a_jars_is_refused_with_the_command_to_run(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "REPO_S3A_JARS", tmp_path / "none")
    bare = {"SPARK_HOME": str(tmp_path)}
    with pytest.raises(S.S3AJarsMissing, match=r"make s3a-jars.*FLEETVIEW_S3A_JARS"):
        S.require_s3a_jars(parse_lake("s3://bucket/lake"), bare)
    S.require_s3a_jars(parse_lake(str(tmp_path / "lake")), bare)  # a local lake needs none
    S.require_s3a_jars(parse_lake("s3://bucket/lake"), {**bare, S.S3A_JARS_ENV: str(tmp_path)})  # named: trusted
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    S.require_s3a_jars(parse_lake("s3://bucket/lake"), bare)  # a Spark distribution that has it


def test_analyze_says_so_and_exits_2(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
           S.S3A_JARS_ENV: "", "SPARK_HOME": str(tmp_path), "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    code = ("import sys; from backend.pipeline import spark as S; from pathlib import Path; "
            f"S.REPO_S3A_JARS = Path({str(tmp_path / 'none')!r}); from backend.pipeline.cli import main; "
            "sys.exit(main(['--lake', 's3://bucket/lake']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "make s3a-jars" in done.stderr and "Traceback" not in done.stderr
