"""data/fs.py on a local folder and on a real S3-compatible server (moto, a separate process on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from data import fs


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "root")
    return request.getfixturevalue("s3_bucket") + "/root"


def test_is_remote_and_join():
    assert fs.is_remote("s3://b/k") and not fs.is_remote("/tmp/x") and not fs.is_remote("rel/x")
    assert not fs.is_remote("file:///tmp/x")
    assert fs.join("s3://b/p/", "a", "/b/", "c.tar") == "s3://b/p/a/b/c.tar"
    assert fs.join("s3://b", "x") == "s3://b/x"
    assert fs.join("/tmp/a", "b", "c") == os.path.join("/tmp/a", "b", "c")
    assert fs.name("s3://b/p/c.wav") == "c.wav" and fs.name("/x/y.wav") == "y.wav"
    assert fs.parent("s3://b/p/c.wav") == "s3://b/p" and fs.parent("s3://b/c") == "s3://b"
    assert fs.parent("/x/y.wav") == "/x"


def test_write_read_exists(root):
    path = fs.join(root, "sub", "a.bin")
    assert not fs.exists(path)
    fs.ensure_dir(fs.join(root, "sub"))
    fs.write_bytes(path, b"hello")
    assert fs.exists(path) and fs.read_bytes(path) == b"hello"
    fs.write_bytes(path, b"world!")  # overwrite in place
    assert fs.read_bytes(path) == b"world!" and fs.size(path) == 6
    fs.write_text(fs.join(root, "t.txt"), "ünï\n")
    assert fs.read_text(fs.join(root, "t.txt")) == "ünï\n"
    with fs.open_read(path) as fh:
        fh.seek(2)
        assert fh.read(3) == b"rld"
        assert fh.seekable()
    if not fs.is_remote(root):  # no temp file left behind by the atomic write
        assert sorted(os.listdir(fs.join(root, "sub"))) == ["a.bin"]


def test_write_bytes_creates_parents(root):
    path = fs.join(root, "deep", "er", "x")
    fs.write_bytes(path, b"1")
    assert fs.read_bytes(path) == b"1"


def test_listdir_glob_find(root):
    assert fs.listdir(root) == [] and fs.find(root) == []
    for rel in ("b.tar", "a.tar", "c.json", "d/e.tar"):
        fs.write_bytes(fs.join(root, *rel.split("/")), rel.encode())
    assert fs.listdir(root) == [fs.join(root, n) for n in ("a.tar", "b.tar", "c.json", "d")]
    assert fs.listdir(fs.join(root, "missing")) == []
    assert fs.glob(fs.join(root, "*.tar")) == [fs.join(root, "a.tar"), fs.join(root, "b.tar")]
    assert fs.glob(fs.join(root, "**", "*.tar")) == [fs.join(root, n) for n in ("a.tar", "b.tar", "d/e.tar")]
    assert fs.find(root) == [fs.join(root, n) for n in ("a.tar", "b.tar", "c.json", "d/e.tar")]
    assert fs.isdir(fs.join(root, "d")) and not fs.isdir(fs.join(root, "a.tar"))
    if fs.is_remote(root):
        assert all(p.startswith("s3://") for p in fs.listdir(root) + fs.glob(fs.join(root, "*")))


def test_listing_sees_writes_of_other_processes(root):
    """No stale listing cache: an object another process writes (a published marker) is seen at once."""
    assert fs.listdir(root) == [] and not fs.exists(fs.join(root, "DONE"))
    code = "import sys; from data import fs; fs.write_bytes(sys.argv[1], b'ok')"
    subprocess.run([sys.executable, "-c", code, fs.join(root, "DONE")], check=True, timeout=120,
                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert fs.exists(fs.join(root, "DONE")) and fs.listdir(root) == [fs.join(root, "DONE")]


def test_rm_tree(root):
    fs.write_bytes(fs.join(root, "v1", "a"), b"a")
    fs.write_bytes(fs.join(root, "v1", "s", "b"), b"b")
    fs.write_bytes(fs.join(root, "v1-other", "c"), b"c")  # shares the string prefix: must survive
    fs.rm_tree(fs.join(root, "v1"))
    assert not fs.exists(fs.join(root, "v1", "a")) and not fs.exists(fs.join(root, "v1", "s", "b"))
    assert fs.read_bytes(fs.join(root, "v1-other", "c")) == b"c"
    assert fs.listdir(root) == [fs.join(root, "v1-other")]
    fs.rm_tree(fs.join(root, "v1"))  # missing: no error
    fs.rm_tree(fs.join(root, "never"))


def test_sha256_streams_blocks(root):
    data = os.urandom(fs.BLOCK * 2 + 123)
    path = fs.join(root, "big.bin")
    fs.write_bytes(path, data)
    assert fs.sha256(path) == hashlib.sha256(data).hexdigest()


def test_local_copy(root):
    fs.write_bytes(fs.join(root, "a.wav"), b"RIFF")
    with fs.local_copy(fs.join(root, "a.wav")) as local:
        assert not fs.is_remote(local) and local.endswith(".wav")
        with open(local, "rb") as fh:
            assert fh.read() == b"RIFF"


def test_put_file_and_rm(root, tmp_path):
    local = tmp_path / "src.bin"
    data = os.urandom(fs.BLOCK + 7)
    local.write_bytes(data)
    target = fs.join(root, "up", "dst.bin")
    fs.put_file(str(local), target)
    assert fs.read_bytes(target) == data
    if not fs.is_remote(root):
        assert sorted(os.listdir(fs.join(root, "up"))) == ["dst.bin"]
    fs.rm(target)
    assert not fs.exists(target)
    fs.rm(target)  # missing: no error


def test_a_store_refusing_checksum_headers_still_takes_uploads(s3_server, s3_bucket, monkeypatch, tmp_path, caplog):
    """A store without flexible checksums answers the SHA-256 header with 501: the upload goes again without it,
    the header is not tried on that store again, and its objects keep the size check."""
    import fsspec.config
    from s3_server import _clear_fsspec_instances, checksum_refusing_store

    with checksum_refusing_store(s3_server["endpoint_url"]) as store:
        monkeypatch.setenv("AWS_ENDPOINT_URL", store["endpoint_url"])
        monkeypatch.setitem(fsspec.config.conf["s3"], "endpoint_url", store["endpoint_url"])
        _clear_fsspec_instances()
        try:
            first = s3_bucket + "/refusing/a.bin"
            fs.write_bytes(first, b"first")
            assert store["refused"] == ["/" + first.removeprefix("s3://")]
            assert "refused the SHA-256 checksum header" in caplog.text
            local = tmp_path / "b.bin"
            local.write_bytes(b"second!")
            fs.put_file(str(local), s3_bucket + "/refusing/b.bin")
            assert len(store["refused"]) == 1  # known now: not asked again
            assert fs.read_bytes(first) == b"first" and fs.read_bytes(s3_bucket + "/refusing/b.bin") == b"second!"
            assert fs.stored_sha256(first) == (5, None)  # no checksum kept: the version check compares sizes
        finally:
            monkeypatch.undo()
            _clear_fsspec_instances()
    # the store behind the proxy takes the header, as before
    direct = s3_bucket + "/direct.bin"
    fs.write_bytes(direct, b"direct")
    assert fs.stored_sha256(direct) == (6, hashlib.sha256(b"direct").hexdigest())


def test_only_a_refused_header_counts_as_a_refusal_not_a_corrupted_upload():
    from botocore.exceptions import ClientError

    from data.s3_checksum import refused_checksum

    def translated(code: str, message: str) -> OSError:
        error = OSError(message)  # as s3fs raises it: the store's message, the ClientError as cause
        error.__cause__ = ClientError({"Error": {"Code": code, "Message": message}}, "PutObject")
        return error

    assert refused_checksum(translated("NotImplemented", "Header x-amz-checksum-sha256 not implemented"))
    assert refused_checksum(translated("InvalidArgument", "x-amz-checksum-algorithm is not supported"))
    assert not refused_checksum(translated("BadDigest", "The SHA256 checksum you specified did not match"))
    assert not refused_checksum(translated("AccessDenied", "Access Denied"))
    assert not refused_checksum(RuntimeError("checksum"))
