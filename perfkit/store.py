"""A run store: a folder of saved runs, listed and filtered as a polars frame.

    store = perfkit.Store("runs")                      # made if missing
    name = store.save(run, tags=["vm", "before"])      # -> "udp_bw-20261130-101500"
    store.list(test="udp_bw", tags="vm")               # one row per run: name, time, test,
                                                       # engine, host, kernel, key figures
    run = store.load(name)                             # a finished perfkit.Run
    perfkit.compare([store.load(a), store.load(b)])    # or store.compare(a, b)

Each run is one Parquet file, `<name>.parquet`, exactly what `run.save()` writes (so
`perfkit.load(path)` reads it too) plus one more metadata entry, `perfkit.store`, with the
name, tags, note and when it was stored. Nothing else is kept: copying, renaming or
deleting files is all the maintenance a store needs, and listing reads only the files'
footers (cached by size and modification time).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
import threading
from pathlib import Path

from perfkit.comparison import compare
from perfkit import savefile
from perfkit.rfc2544 import Rfc2544Result, load as load_rfc2544
from perfkit.run import Run
from perfkit.stats import HTTP_KEY_FIGURES, KEY_FIGURES, LOWER_IS_BETTER  # noqa: F401 (also imported from here)
from perfkit.units import rate_text

SUFFIX = ".parquet"
META_KEY = b"perfkit.store"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,119}")
TAG_RE = re.compile(r"[^\s,][^,]{0,63}")


def check_name(name) -> str:
    name = str(name)
    if not NAME_RE.fullmatch(name) or name.endswith(SUFFIX):
        raise ValueError(f"name: {name!r} is not a run name (1-120 letters, digits and ._+=@-, "
                         "starting with a letter or digit, no .parquet)")
    return name


def check_tags(tags) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = [tags]
    out = []
    for t in tags:
        if not isinstance(t, str) or not TAG_RE.fullmatch(t.strip()) or t != t.strip():
            raise ValueError(f"tags: {t!r} is not a tag (1-64 characters, no commas, "
                             "no leading or trailing space)")
        if t not in out:
            out.append(t)
    return out


def _parse_time(text):
    if not text:
        return None
    try:
        t = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc)


def _schema():
    import polars as pl  # polars and pyarrow load with the first listing or load, not with perfkit
    cols = {"name": pl.String, "time": pl.Datetime("us", "UTC"), "test": pl.String,
            "engine": pl.String, "host": pl.String, "kernel": pl.String, "target": pl.String,
            "lab": pl.String, "size": pl.Int64, "rate": pl.String, "duration_s": pl.Float64,
            "tags": pl.List(pl.String), "note": pl.String, "error": pl.String,
            "cluster": pl.String, "hosts": pl.List(pl.String)}
    cols.update({k: pl.Float64 for k in KEY_FIGURES})
    cols.update({"rows": pl.Int64, "path": pl.String})
    return cols


def run_record(meta: dict, path: str | None = None) -> dict:
    """One listing row from a saved run's metadata (the JSON entries of run.save())."""
    spec = meta.get("spec") or {}
    env = meta.get("env") or {}
    summary = meta.get("summary") or {}
    info = meta.get("run") or {}
    store = meta.get("store") or {}
    name = store.get("name") or (Path(path).name[: -len(SUFFIX)] if path else None)
    rec = {
        "name": name,
        "time": _parse_time(env.get("started_utc")),
        "test": "rfc2544" if info.get("kind") == "rfc2544" else spec.get("test") or summary.get("test"),
        "engine": info.get("engine") or env.get("engine") or summary.get("engine"),
        "host": env.get("host"), "kernel": env.get("kernel"),
        "target": spec.get("host"), "lab": spec.get("lab"),
        "size": spec.get("size"), "rate": rate_text(spec),
        "duration_s": summary.get("duration_s"),
        "tags": list(store.get("tags") or []), "note": store.get("note"),
        "error": info.get("error") or summary.get("error"),
        # a cluster run (perfkit.cluster): the cluster and the hosts that shared the load
        "cluster": summary.get("cluster"), "hosts": list(summary.get("hosts") or env.get("hosts") or {}),
    }
    for k in KEY_FIGURES:
        v = summary.get(k)
        rec[k] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    rec["rows"] = meta.get("rows")
    rec["path"] = path
    return rec


def _read_meta(path: str) -> dict:
    """The perfkit entries of a Parquet file's footer, decoded; ValueError (naming the file) if it
    has none or they are damaged."""
    raw, rows = savefile.read_meta(path)
    out = {"rows": rows}
    for key, name in ((b"perfkit.spec", "spec"), (b"perfkit.env", "env"), (b"perfkit.summary", "summary"),
                      (b"perfkit.run", "run"), (META_KEY, "store")):
        if key in raw:
            out[name] = savefile.decode(path, raw, key)
    return out


class Store:
    """A folder of saved runs. Store(path) makes the folder if it is missing.

    save(run, name=None, tags=(), note=None) -> name (a Run, or an Rfc2544Result); list(**filters)
    -> polars frame; load(name) -> Run (or the Rfc2544Result); delete(name); names(); compare(*names) -> perfkit.Comparison.
    Files put in the folder by hand (any `*.parquet` written by run.save()) are listed
    too, named after the file."""

    def __init__(self, path):
        self.path = Path(path).expanduser()
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"path: {self.path} exists and is not a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, tuple[tuple, dict]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ files
    def file(self, name) -> Path:
        """Where the run called name is (or would be) stored."""
        return self.path / (check_name(name) + SUFFIX)

    def names(self) -> list[str]:
        """Every stored run's name, oldest file first."""
        files = []
        for p in self.path.glob("*" + SUFFIX):
            if NAME_RE.fullmatch(p.stem):
                try:
                    st = p.stat()
                except OSError:      # removed meanwhile
                    continue
                if p.is_file():
                    files.append((st.st_mtime, p.name, p.stem))
        return [stem for _, _, stem in sorted(files)]

    def __contains__(self, name) -> bool:
        try:
            return self.file(name).is_file()
        except ValueError:
            return False

    def __len__(self) -> int:
        return len(self.names())

    def __iter__(self):
        return iter(self.names())

    def __repr__(self) -> str:
        return f"<perfkit.Store {str(self.path)!r}: {len(self)} runs>"

    # ------------------------------------------------------------------ save
    def _default_name(self, run) -> str:
        test = "rfc2544" if isinstance(run, Rfc2544Result) else \
            re.sub(r"[^A-Za-z0-9._-]", "_", str(getattr(run.spec, "test", "run")))[:40] or "run"
        t = _parse_time(run.env.get("started_utc")) or _dt.datetime.now(_dt.timezone.utc)
        base = f"{test}-{t:%Y%m%d-%H%M%S}"
        name, n = base, 1
        while (self.path / (name + SUFFIX)).exists():
            n += 1
            name = f"{base}-{n}"
        return name

    def save(self, run, name: str | None = None, tags=(), note: str | None = None,
             overwrite: bool = False) -> str:
        """Store a finished run (one made here, or loaded); returns its name.

        name: default '<test>-<start time UTC>' (made unique); tags: a string or a list of
        strings to filter by later; note: free text. An existing name is an error unless
        overwrite=True."""
        finished = run.stopped if isinstance(run, Rfc2544Result) else getattr(run, "done", False)
        if not finished:
            raise ValueError("run: the run has not finished: wait() before saving it")
        tags = check_tags(tags)
        if note is not None and not isinstance(note, str):
            raise ValueError(f"note: {note!r} is not text")
        name = check_name(name) if name is not None else self._default_name(run)
        final = self.file(name)
        if final.exists() and not overwrite:
            raise ValueError(f"name: a run called {name!r} is already stored (overwrite=True replaces it)")
        fd, tmp = tempfile.mkstemp(prefix=".saving-", suffix=SUFFIX, dir=self.path)
        os.close(fd)
        try:
            run.save(tmp, extra={META_KEY: json.dumps({   # under the run's checksum too
                "name": name, "tags": tags, "note": note,
                "stored_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }).encode()})
            os.replace(tmp, final)          # a reader sees the old file or the whole new one
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return name

    # ------------------------------------------------------------------ read
    def info(self, name) -> dict:
        """The listing row of one run, as a dict."""
        path = self.file(name)
        if not path.is_file():
            raise KeyError(self._missing(name))
        return self._record(path)

    def _record(self, path: Path) -> dict:
        st = path.stat()
        key = (st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(str(path))
            if hit and hit[0] == key:
                return dict(hit[1])
        rec = run_record(_read_meta(str(path)), str(path))
        rec["name"] = path.stem   # the file's name is the name (files may be renamed by hand)
        with self._lock:
            self._cache[str(path)] = (key, rec)
        return dict(rec)

    def _missing(self, name) -> str:
        near = [n for n in self.names() if str(name).lower() in n.lower()][:5]
        hint = f"; similar: {', '.join(near)}" if near else ""
        return f"no run called {name!r} in {self.path}{hint}"

    def load(self, name):
        """The stored run as a finished perfkit.Run, or a stored RFC 2544 result as its
        Rfc2544Result (run.name, run.tags, run.note set)."""
        path = self.file(name)
        if not path.is_file():
            raise KeyError(self._missing(name))
        meta = _read_meta(str(path))
        run = load_rfc2544(path) if (meta.get("run") or {}).get("kind") == "rfc2544" else Run.load(path)
        store = meta.get("store") or {}
        run.name, run.tags, run.note = path.stem, list(store.get("tags") or []), store.get("note")
        return run

    def delete(self, name) -> None:
        path = self.file(name)
        if not path.is_file():
            raise KeyError(self._missing(name))
        path.unlink()
        with self._lock:
            self._cache.pop(str(path), None)

    def list(self, text: str | None = None, tags=None, since=None, until=None, **equals):
        """Stored runs as a polars frame, newest first: name, time (UTC), test, engine,
        host, kernel, target, lab, size, rate, duration_s, tags, note, error, cluster and
        hosts (a cluster run's, else null and []), the key figures (KEY_FIGURES), rows and path.

        Filters (all must hold): any column by value (test="udp_bw", engine="socket",
        host=..., kernel=...; a list or tuple matches any of its values); tags: a tag or
        tags the run must all have; text: a case-insensitive substring of the name, test,
        host, a cluster run's hosts, tags or note; since/until: datetimes or ISO strings bounding the run's start.
        Files that are not perfkit runs are skipped."""
        import polars as pl
        schema = _schema()
        unknown = set(equals) - set(schema)
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: no such column to filter on "
                             f"(columns: {', '.join(schema)})")
        need_tags = check_tags(tags)
        records = []
        for name in self.names():
            try:
                records.append(self._record(self.path / (name + SUFFIX)))
            except (ValueError, OSError, KeyError, TypeError):
                continue   # not a run, half written by someone else, or unreadable: not listed
        df = pl.DataFrame(records, schema=schema, orient="row") if records else pl.DataFrame(schema=schema)
        for col, want in equals.items():
            if isinstance(want, (list, tuple, set, frozenset)):
                df = df.filter(pl.col(col).is_in(list(want)))
            elif want is None:
                df = df.filter(pl.col(col).is_null())
            else:
                df = df.filter(pl.col(col) == want)
        for t in need_tags:
            df = df.filter(pl.col("tags").list.contains(t))
        for bound, op in ((since, "ge"), (until, "le")):
            if bound is not None:
                t = bound if isinstance(bound, _dt.datetime) else _parse_time(bound)
                if t is None:
                    raise ValueError(f"{'since' if op == 'ge' else 'until'}: {bound!r} is not a date/time")
                if t.tzinfo is None:
                    t = t.replace(tzinfo=_dt.timezone.utc)
                df = df.filter(getattr(pl.col("time"), op)(pl.lit(t)))
        if text:
            needle = str(text).lower()
            hay = pl.concat_str([pl.col("name"), pl.col("test").fill_null(""), pl.col("host").fill_null(""),
                                 pl.col("hosts").list.join(" "),
                                 pl.col("tags").list.join(" "), pl.col("note").fill_null(""),
                                 pl.col("engine").fill_null("")], separator=" ").str.to_lowercase()
            df = df.filter(hay.str.contains(needle, literal=True))
        return df.sort(["time", "name"], descending=True, nulls_last=True)

    def compare(self, *names, **kwargs):
        """perfkit.compare of the stored runs called names (the first is the baseline)."""
        if len(names) == 1 and isinstance(names[0], (list, tuple)):
            names = tuple(names[0])
        return compare([self.load(n) for n in names], **kwargs)
