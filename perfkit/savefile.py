"""A saved run's file: the rows as Parquet, perfkit's JSON entries in the footer, and a
SHA-256 over both (perfkit.sha256), so a changed file is refused instead of read as another
measurement. Every error names the file and says what is wrong in words.

Files saved before the checksum existed have none; they load as they are.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os

CHECKSUM_KEY = b"perfkit.sha256"
HOST_ROWS_KEY = b"perfkit.host_rows"   # a cluster run's rows per host (perfkit.cluster), when it has them
REQUIRED = (b"perfkit.spec", b"perfkit.env", b"perfkit.summary", b"perfkit.histogram", b"perfkit.run")


class SaveFileError(ValueError):
    """A saved run that cannot be read as it was written; the message names the file."""


def digest(frame, meta: dict) -> str:
    """SHA-256 over the frame (column names, types, values) and the perfkit.* entries."""
    h = hashlib.sha256()
    h.update(b"perfkit-run-v1\0%d\0" % frame.height)
    for s in frame.get_columns():
        h.update(f"{s.name}\0{s.dtype}\0".encode())
        h.update(json.dumps(s.to_list(), default=str).encode())   # floats as repr: exact
    for key in sorted(k for k in meta if k.startswith(b"perfkit.") and k != CHECKSUM_KEY):
        h.update(key + b"\0" + meta[key] + b"\0")
    return h.hexdigest()


def write(path, frame, entries: dict[bytes, bytes]) -> None:
    """The frame and entries (perfkit.* keys, JSON bytes) into path, sealed with their checksum."""
    import pyarrow as pa   # pyarrow loads in ~0.3 s: only when a file is written or read
    import pyarrow.parquet as pq
    table = frame.to_arrow()
    meta = {**dict(table.schema.metadata or {}), **entries}
    meta[CHECKSUM_KEY] = digest(frame, meta).encode()
    buf = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(meta), buf)
    with open(path, "wb") as f:   # Python's file raises on a full disk; pyarrow's writer was seen not to
        f.write(buf.getvalue().to_pybytes())


def _check_path(path) -> None:
    if not os.path.exists(path):
        raise SaveFileError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise SaveFileError(f"{path}: not a regular file")


def read_meta(path) -> tuple[dict, int]:
    """The footer's entries (raw bytes) and the row count, without reading the rows."""
    import pyarrow.parquet as pq
    _check_path(path)
    try:
        md = pq.read_metadata(str(path))
    except Exception:   # pyarrow says ArrowInvalid/OSError in its own words
        raise SaveFileError(f"{path}: not a Parquet file, or its footer is damaged") from None
    raw = dict(md.metadata or {})
    if b"perfkit.spec" not in raw:
        raise SaveFileError(f"{path}: not a perfkit run (no perfkit metadata)")
    return raw, md.num_rows


def decode(path, raw: dict, key: bytes):
    """One entry's JSON, or an error naming the file and the entry."""
    if key not in raw:
        raise SaveFileError(f"{path}: its perfkit metadata has no {key.decode()} entry")
    try:
        return json.loads(raw[key])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise SaveFileError(f"{path}: its {key.decode()} entry is damaged (not JSON)") from None


def read(path):
    """(frame, raw entries) of a saved run, the checksum verified where the file has one."""
    import polars as pl
    import pyarrow.parquet as pq
    raw, _ = read_meta(path)
    try:
        table = pq.read_table(str(path))
        frame = pl.from_arrow(table.replace_schema_metadata(None))
    except Exception:   # any reader error is a damaged file to the user
        raise SaveFileError(f"{path}: its rows cannot be read; the file is damaged") from None
    for key in REQUIRED:
        decode(path, raw, key)
    if CHECKSUM_KEY in raw and raw[CHECKSUM_KEY] != digest(frame, raw).encode():
        raise SaveFileError(f"{path}: the file has changed since it was saved (its checksum does not match)")
    return frame, raw


def frame_entry(frame) -> bytes:
    """A second frame (a cluster run's per-host rows) as a JSON entry: its columns and the frame
    as Arrow IPC (base64), so its types come back exactly; sealed by the checksum like every entry."""
    buf = io.BytesIO()
    frame.write_ipc(buf)
    return json.dumps({"columns": frame.columns, "rows": frame.height,
                       "arrow_ipc_base64": base64.b64encode(buf.getvalue()).decode()}).encode()


def frame_from_entry(path, raw: dict, key: bytes):
    """The frame frame_entry wrote under key, or an error naming the file and the entry."""
    import polars as pl
    d = decode(path, raw, key)
    try:
        frame = pl.read_ipc(io.BytesIO(base64.b64decode(d["arrow_ipc_base64"], validate=True)))
    except Exception:   # any decoding error is a damaged entry to the user
        raise SaveFileError(f"{path}: its {key.decode()} entry is damaged (not a frame)") from None
    if frame.columns != d.get("columns") or frame.height != d.get("rows"):
        raise SaveFileError(f"{path}: its {key.decode()} entry is damaged (columns or rows differ)")
    return frame
