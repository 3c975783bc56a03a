"""Ship the kraft_jbod package to a cluster's executors, and name what a failed job lacked.

Strategy: on a non-local master the driver zips the ``kraft_jbod`` package it runs from
(Python sources only, a few MB) and adds the zip as a py-file (``addPyFile``, or ``addArtifacts(pyfile=True)`` under
Spark Connect), so executors that have pyspark, pyarrow and pandas (a stock cluster) but
not kraft-jbod run the job unchanged, with the driver's exact code. The two native
dependencies cannot travel this way and are optional there: without crc32c the CRC-32C
is computed in pure Python (:mod:`kraft_jbod.wire.crc`); without cramjam gzip goes through
zlib, and a batch compressed with snappy, lz4 or zstd is a "compression library missing"
anomaly of its frame (:mod:`kraft_jbod.wire.compression`). The zip lives in the user's
cache folder under a name carrying a hash of every shipped file's path, size and mtime,
so it is rebuilt only when the code changes; it is written under a temporary name and
renamed, so concurrent runs never see half a zip.

Invariants:

* Nothing is shipped to ``local[...]`` masters (the workers import the driver's package).
* A zip already named in ``spark.submit.pyFiles`` as ``kraft_jbod*.zip`` means the user
  shipped the package: nothing is added.
* The zip holds ``kraft_jbod/**.py`` and ``py.typed`` only, in
  sorted order with fixed timestamps, so the same sources give the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Final

__all__ = ["explain_failure", "is_local_master", "package_zip", "ship_package"]

_FIXED_TIME: Final = (2020, 1, 1, 0, 0, 0)
# Last "SomethingError: text" line of a Python traceback carried in a Spark exception.
_PY_ERROR: Final = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit)): (.*)$", re.MULTILINE)


def _package_roots() -> list[Path]:
    import kraft_jbod

    return [Path(kraft_jbod.__file__ or "").resolve().parent]


def _sources(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out.extend(Path(dirpath) / f for f in sorted(files) if f.endswith(".py") or f == "py.typed")
    return out


def package_zip(cache_dir: Path) -> Path:
    """The zip of the running ``kraft_jbod`` package in ``cache_dir`` (built when missing).

    Raises:
        OSError: the cache folder or the zip cannot be written.
    """
    files = [(root, f) for root in _package_roots() for f in _sources(root)]
    h = hashlib.sha256()
    for root, f in files:
        st = f.stat()
        h.update(f"{root.name}/{f.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    target = cache_dir / f"kraft_jbod-{h.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, f in files:
            info = zipfile.ZipInfo(f"{root.name}/{f.relative_to(root).as_posix()}", _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, f.read_bytes())
    os.replace(tmp, target)
    return target


def is_local_master(master: str | None) -> bool:
    """True for ``local``, ``local[N]`` and ``local[*]``. ``local-cluster[...]`` runs real
    executor processes, which need the package as a cluster's do."""
    return master is not None and (master == "local" or master.startswith("local["))


def ship_package(spark: Any, cache_dir: Path) -> Path | None:
    """Add the package zip to ``spark`` when its master is not local; returns the zip
    shipped, or None when nothing was needed.

    Raises:
        OSError: the zip cannot be built.
    """
    try:
        master = spark.conf.get("spark.master")
    except Exception:
        master = None
    if is_local_master(master):
        return None
    try:
        shipped = spark.conf.get("spark.submit.pyFiles", "") or ""
    except Exception:
        shipped = ""
    if any(Path(p).name.startswith("kraft_jbod") and p.endswith(".zip") for p in shipped.split(",") if p):
        return None
    path = package_zip(cache_dir)
    add_artifacts = getattr(spark, "addArtifacts", None)
    if getattr(spark, "is_remote", lambda: False)() or not hasattr(spark, "sparkContext"):
        if add_artifacts is None:  # pragma: no cover - every Connect session has it
            raise OSError("this Spark session cannot receive the package (no addArtifacts)")
        add_artifacts(str(path), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(path))
    return path


def explain_failure(exc: BaseException) -> str:
    """One or two readable lines for a failed Spark job: the Python error the executor
    raised when there is one (the last ``XxxError: text`` of the carried traceback),
    else the first line of the JVM's message, plus a hint for errors with a known cause."""
    text = str(exc)
    found = _PY_ERROR.findall(text)
    if found:
        name, msg = found[-1]
        line = f"{name}: {msg.strip()}"
    else:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
        line = f"{type(exc).__name__}: {first[:500]}"
    hint = ""
    if "No module named" in line:
        hint = (
            "\n  the executors' Python lacks a module: kraft-jbod ships its own package to "
            "non-local masters, but pyarrow and pandas must be installed there "
            "(or ship a packed environment, see docs/spark.md)"
        )
    elif "Python in worker has different version" in text or "PYTHON_VERSION_MISMATCH" in text:
        hint = "\n  the executors' Python differs from the driver's: set spark.pyspark.python (docs/spark.md)"
    return line + hint
