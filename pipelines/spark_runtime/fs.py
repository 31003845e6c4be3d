"""Inputs and outputs on any Hadoop file system, through Spark's own FileSystem layer.

A path without a scheme, or a ``file://`` URI, is a local file (read by the tasks themselves,
the fast path).  Any other URI (``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``, ...) goes
through the Hadoop FileSystem of the Spark session: :func:`check_uri` finds, before any work
starts, a scheme the cluster has no connector for, a missing bucket or path (an
:class:`InputError` of one line, code "connector" or "missing"); :func:`resolve_inputs` copies
remote capture files into the job's work directory with Spark's binary-file reader (one task
per file) and hands the job local paths; outputs on such a file system are written with
Spark's DataFrame writer."""

from __future__ import annotations

import hashlib
import os
import tempfile
from urllib.parse import unquote, urlparse

from amqp_dissect.pipelines.archive import CAPTURE_NAME, InputError, expand_inputs
# parse_size: with the options whose sizes it reads (a light module the CLI imports at start)
from amqp_dissect.pipelines.options import parse_size  # noqa: F401  (also this module's name)


# scheme -> (the connector to add, a --packages coordinate for it; {hadoop}: the cluster's version)
CONNECTORS = {
    "s3a": ("the S3A connector (hadoop-aws and its AWS SDK)", "org.apache.hadoop:hadoop-aws:{hadoop}"),
    "s3": ("the S3A connector (hadoop-aws; write s3a:// URIs)", "org.apache.hadoop:hadoop-aws:{hadoop}"),
    "s3n": ("the S3A connector (hadoop-aws; write s3a:// URIs)", "org.apache.hadoop:hadoop-aws:{hadoop}"),
    "abfs": ("the ABFS connector (hadoop-azure)", "org.apache.hadoop:hadoop-azure:{hadoop}"),
    "abfss": ("the ABFS connector (hadoop-azure)", "org.apache.hadoop:hadoop-azure:{hadoop}"),
    "wasb": ("the WASB connector (hadoop-azure)", "org.apache.hadoop:hadoop-azure:{hadoop}"),
    "wasbs": ("the WASB connector (hadoop-azure)", "org.apache.hadoop:hadoop-azure:{hadoop}"),
    "gs": ("the Cloud Storage connector (gcs-connector)", "com.google.cloud.bigdataoss:gcs-connector:hadoop3-2.2.22"),
    "hdfs": ("the HDFS client (hadoop-client)", "org.apache.hadoop:hadoop-client:{hadoop}"),
}


def is_local(uri: str) -> bool:
    """A path without a scheme (a Windows drive letter is not one) or a ``file:`` URI."""
    u = urlparse(str(uri))
    return u.scheme in ("", "file") or len(u.scheme) == 1


def local_path(uri: str) -> str:
    """The local path of a path or ``file:`` URI."""
    u = urlparse(str(uri))
    return unquote(u.path) if u.scheme == "file" else str(uri)


def _java_error(e) -> tuple[str, str]:
    """(class name, message) of the Java exception behind a Py4J error (the innermost cause's message)."""
    je = getattr(e, "java_exception", None)
    if je is None:
        return type(e).__name__, str(e).splitlines()[0] if str(e) else type(e).__name__
    name = je.getClass().getName()
    msg = je.getMessage() or ""
    cause = je.getCause()
    while cause is not None:
        name2, msg2 = cause.getClass().getName(), cause.getMessage()
        if msg2:
            name, msg = name2, msg2
        cause = cause.getCause()
    return name, msg.splitlines()[0] if msg else name


def _hadoop_version(spark) -> str:
    try:
        return spark._jvm.org.apache.hadoop.util.VersionInfo.getVersion()
    except Exception:  # (no JVM access: a Spark Connect session)
        return "<the cluster's Hadoop version>"


def _connector_error(spark, uri: str, scheme: str, detail: str) -> InputError:
    what, coord = CONNECTORS.get(scheme, (f"a Hadoop FileSystem for {scheme}://", None))
    how = f" (e.g. --packages {coord.format(hadoop=_hadoop_version(spark))})" if coord else ""
    return InputError("connector", f"{uri}: this Spark has no file system for {scheme}:// ({detail}): "
                                   f"add {what} to the cluster{how}")


def check_uri(spark, uri: str, must_exist: bool = True):
    """The Hadoop FileSystem of ``uri`` and its Path, once sure that it is usable: the scheme has a
    connector, and (``must_exist``) something exists there (a glob matches), else for an output
    the bucket or root of the URI exists.  Raises :class:`InputError` ("connector", "missing")."""
    scheme = urlparse(uri).scheme.lower()
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    try:
        path = jvm.org.apache.hadoop.fs.Path(uri)
        fs = path.getFileSystem(conf)
    except Exception as e:
        name, msg = _java_error(e)
        if "UnsupportedFileSystemException" in name or "ClassNotFound" in name or "ClassNotFound" in msg \
                or "NoClassDefFound" in name:
            raise _connector_error(spark, uri, scheme, msg) from None
        raise InputError("missing", f"{uri}: cannot open: {msg}") from None
    try:
        if must_exist:
            hits = fs.globStatus(path)
            if hits is None or len(hits) == 0:
                raise InputError("missing", f"{uri}: no such file or directory")
        else:
            root = path.getParent() or path
            while root.getParent() is not None and not fs.exists(root):
                root = root.getParent()
            if not fs.exists(root):
                raise InputError("missing", f"{uri}: no such bucket or file system root")
    except InputError:
        raise
    except Exception as e:
        name, msg = _java_error(e)
        if "ClassNotFound" in name or "ClassNotFound" in msg or "NoClassDefFound" in name:
            raise _connector_error(spark, uri, scheme, msg) from None
        raise InputError("missing", f"{uri}: cannot open: {msg}") from None
    return fs, path


def check_output(spark, out) -> str:
    """The URI of the output directory ``out`` (a local path becomes ``file://``), its file system
    checked (:func:`check_uri`) before any work starts."""
    out = os.fspath(out)
    if is_local(out):
        return "file://" + os.path.abspath(local_path(out))
    check_uri(spark, out, must_exist=False)
    return out


def resolve_inputs(spark, paths, work: str) -> tuple[list[str], dict, str | None]:
    """The local capture files of ``paths`` (:func:`expand_inputs`; remote URIs first checked,
    then copied by Spark's binary-file reader into a ``_inputs`` folder of the local work
    directory, or of a temporary one), ``{local copy: URI}``, and the folder of the copies (or
    None).  Raises :class:`InputError` before any work when a URI cannot be read."""
    local, remote = [], []
    for p in paths:
        p = os.fspath(p)
        (local if is_local(p) else remote).append(p)
    for uri in remote:  # every URI checked before anything is read
        check_uri(spark, uri, must_exist=True)
    files = expand_inputs([local_path(p) for p in local]) if local else []
    if not remote:
        return files, {}, None
    wl = local_path(work) if is_local(work) else None
    folder = os.path.join(wl, "_inputs") if wl else tempfile.mkdtemp(prefix="amqp-dissect-inputs-")
    os.makedirs(folder, exist_ok=True)
    names = _copy_remote(spark, remote, folder)
    if not names:
        raise InputError("empty", "no capture files found in " + ", ".join(remote))
    return files + sorted(names, key=lambda f: names[f]), names, folder


def _copy_fn(folder: str):
    def fn(batches):
        import pyarrow as pa

        for b in batches:
            out_l, out_u = [], []
            for uri, content in zip(b.column("path").to_pylist(), b.column("content").to_pylist()):
                d = os.path.join(folder, hashlib.sha1(uri.rsplit("/", 1)[0].encode()).hexdigest()[:12])
                os.makedirs(d, exist_ok=True)
                dest = os.path.join(d, unquote(uri.rsplit("/", 1)[-1]))
                tmp = dest + f".{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(content)
                os.replace(tmp, dest)
                out_l.append(dest)
                out_u.append(uri)
            yield pa.RecordBatch.from_arrays([pa.array(out_l, pa.string()), pa.array(out_u, pa.string())],
                                             names=["local", "uri"])
    return fn


def _copy_remote(spark, uris: list[str], folder: str) -> dict:
    """Copy the capture files named by ``uris`` (files, folders searched recursively for capture
    names, globs) into ``folder`` with Spark's binary-file reader; returns {local copy: URI}."""
    from pyspark.sql import functions as F

    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    wanted = []
    for uri in uris:  # the files, as expand_inputs picks them: named ones, capture names in folders
        path = jvm.org.apache.hadoop.fs.Path(uri)
        fs = path.getFileSystem(conf)
        for st in fs.globStatus(path) or []:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                while it.hasNext():
                    f = it.next().getPath()
                    if CAPTURE_NAME.search(f.getName()) and not f.getName().startswith("."):
                        wanted.append(f.toString())
            else:
                wanted.append(st.getPath().toString())
    wanted = list(dict.fromkeys(wanted))
    if not wanted:
        return {}
    df = spark.read.format("binaryFile").load(wanted).select("path", "content")
    df = df.repartition(len(wanted))
    got = df.mapInArrow(_copy_fn(folder), "local string, uri string").collect()
    return {r.local: r.uri for r in got}


def write_files(spark, directory_uri: str, files) -> int:
    """Replace the folder ``directory_uri`` (any Hadoop URI) by the ``files``, ``(name, bytes)``
    pairs (consumed one at a time), and ``_SUCCESS``, through the session's Hadoop FileSystem
    (the driver writes: the tasks made the bytes, e.g. Parquet files with the CLI's schema and
    pandas metadata, which Spark's own writer cannot carry).  Returns the files written."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    folder = jvm.org.apache.hadoop.fs.Path(directory_uri)
    fs = folder.getFileSystem(conf)
    if fs.exists(folder):
        fs.delete(folder, True)
    fs.mkdirs(folder)
    n = 0
    for name, data in files:
        out = fs.create(jvm.org.apache.hadoop.fs.Path(folder, name), True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        n += 1
    fs.create(jvm.org.apache.hadoop.fs.Path(folder, "_SUCCESS"), True).close()
    return n
