"""Property tests: whatever the input, loading gives a valid set or a ``ReferenceFormatError``."""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import logging
import lzma
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refmount.errors import ReferenceFormatError
from refmount.formats import LoadOptions, load
from refmount.formats.parquet import load_parquet
from refmount.formats.values import MAX_OFFSET
from refmount.model import ROOT_INODE, Inline, Inode, Range, ReferenceSet, Whole
from refmount.names import NAME_MAX, key_problem
from refmount.namespace.nodes import GridChunk, StaticFile
from refmount.namespace.tree import Tree

SETTINGS = settings(
    max_examples=150,
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass
class MemorySource:
    """A ``ReferenceSource`` over bytes in memory: one file, or a directory of files."""

    url: str
    files: dict[str, bytes] = field(default_factory=dict)
    directory: bool = False

    @property
    def base_url(self) -> str:
        return "/refs"

    def is_directory(self) -> bool:
        return self.directory

    def names(self, relative: str = "") -> list[str] | None:
        below = f"{relative}/" if relative else ""
        return sorted({k[len(below) :].split("/")[0] for k in self.files if k.startswith(below)})

    def read(self, relative: str = "") -> bytes:
        try:
            return self.files[relative]
        except KeyError:
            raise FileNotFoundError(relative) from None


class Warnings(logging.Handler):
    """Collects the warnings logged while it is attached to the root logger."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> Warnings:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)


# ----------------------------------------------------------------------------- strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)

components = st.sampled_from(
    ["a", "b", "x", ".zarray", ".zattrs", "0", "0.0", "1", "c", "", ".", "..", "é", "e\u0301"]
) | st.sampled_from(
    ["a b", "new\nline", "nul\x00", "x" * 255, "x" * 256, "é" * 128, "\ud800", "{{u}}"]
)
keys = st.lists(components, min_size=1, max_size=4).map("/".join) | st.text(max_size=10)

numbers = (
    st.integers(min_value=-3, max_value=100)
    | st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63)])
    | st.floats(allow_nan=False, max_value=1e20, min_value=-1e20)
    | st.booleans()
    | st.none()
    | st.sampled_from(["1", "x", "{{n}}", ""])
)
urls = (
    st.sampled_from(
        [
            "data.bin",
            "/abs/data.bin",
            "s3://bucket/key",
            "file://rel.bin",
            "",
            "{{u}}",
            "{{u",
            "{{ v }}",
        ]
    )
    | st.none()
    | st.integers()
    | st.text(max_size=6)
)
base64_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_!é "
inline_texts = (
    st.text(max_size=12)
    | st.text(alphabet=base64_alphabet, max_size=12).map(lambda t: "base64:" + t)
    | st.binary(max_size=12).map(lambda b: "base64:" + base64.b64encode(b).decode())
)
ref_values = (
    inline_texts
    | st.lists(st.one_of(urls, numbers), min_size=1, max_size=4)
    | st.tuples(urls, numbers, numbers).map(list)
    | st.dictionaries(st.text(max_size=4), json_values, max_size=3)
    | json_values
)
refs_maps = st.dictionaries(keys, ref_values, max_size=8)

dimension_specs = (
    st.lists(st.integers(-2, 5) | st.text(max_size=3) | st.none(), max_size=3)
    | st.fixed_dictionaries(
        {},
        optional={
            "start": st.integers(-3, 3) | st.text(max_size=2),
            "stop": st.integers(-3, 6)
            | st.none()
            | st.floats(0, 5)
            | st.sampled_from([10**12, 2**62]),
            "step": st.integers(-2, 3) | st.booleans(),
        },
    )
    | json_values
)
gen_items = (
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["k/{{i}}", "{{i}}.{{j}}", "k", "{{ i }}/", "{{u}}", "{{"])
            | st.integers(),
            "url": urls,
            "dimensions": st.dictionaries(st.sampled_from(["i", "j", "u"]), dimension_specs)
            | json_values,
            "offset": numbers | st.sampled_from(["{{i}}", "{{i * 10}}", "{{ j }}", "{{nope}}"]),
            "length": numbers | st.sampled_from(["{{i}}", "5", "{{ -1 }}"]),
        },
    )
    | json_values
)
templates = st.dictionaries(
    st.sampled_from(["u", "v", "n", "f", "i", "range"]),
    st.sampled_from(["data.bin", "s3://b/k", "{{c}}.bin", "{{u", "", "{{ undefined }}"])
    | json_values,
    max_size=4,
)
v1_documents = st.fixed_dictionaries(
    {"version": st.sampled_from([1, 1.0, 0, 2, "1", None, True])},
    optional={
        "templates": templates,
        "refs": refs_maps | json_values,
        "gen": st.lists(gen_items, max_size=3) | json_values,
    },
)
documents = json_values | refs_maps | v1_documents


def encoded(document: object) -> bytes:
    return json.dumps(document).encode()


def compressed(data: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(data)
    if how == "bz2":
        return bz2.compress(data)
    if how == "xz":
        return lzma.compress(data)
    return zstandard.ZstdCompressor().compress(data)


MAGIC = [b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"BZh9", b"\xfd7zXZ\x00", b"PAR1", b""]


@st.composite
def file_bytes(draw: st.DrawFn) -> tuple[str, bytes]:
    """A reference file: JSON, compressed JSON (maybe cut short), or noise after a magic."""
    kind = draw(st.sampled_from(["json", "compressed", "noise"]))
    name = draw(st.sampled_from(["refs.json", "refs.json.gz", "refs.zst", "refs.bz2", "refs.xz"]))
    if kind == "json":
        return name, encoded(draw(documents))
    if kind == "compressed":
        how = draw(st.sampled_from(["gzip", "bz2", "xz", "zstd"]))
        data = compressed(encoded(draw(documents)), how)
        cut = draw(st.integers(0, len(data)))
        return name, data[: len(data) - cut] if draw(st.booleans()) else data
    return name, draw(st.sampled_from(MAGIC)) + draw(st.binary(max_size=64))


# ----------------------------------------------------------------------------- invariants


def walk(tree: Tree, key: str) -> Inode | None:
    inode: Inode | None = ROOT_INODE
    for part in key.split("/"):
        assert inode is not None
        inode = tree.lookup(inode, part)
        if inode is None:
            return None
    return inode


def check_tree(tree: Tree, references: ReferenceSet, *, skip_invalid: bool) -> None:
    """Every listed name is a valid path component, and every key a file whose path is itself."""
    stack = [ROOT_INODE]
    seen = 0
    while stack and seen < 2000:
        directory = stack.pop()
        names: list[str] = []
        for entry, _ in tree.children(directory):
            seen += 1
            names.append(entry.name)
            assert "/" not in entry.name
            assert key_problem(entry.name) is None, entry.name
            assert len(entry.name.encode()) <= NAME_MAX
            assert tree.lookup(directory, entry.name) == entry.inode
            assert tree.parent(entry.inode) == directory
            assert tree.is_dir(entry.inode) == entry.is_dir
            if entry.is_dir:
                stack.append(entry.inode)
        assert len(set(names)) == len(names), names
    keys = list(references.keys())
    for key in keys:
        if key_problem(key) is not None:
            assert skip_invalid, key
            continue
        inode = walk(tree, key)
        if inode is None or tree.is_dir(inode) or not tree.is_static(inode):
            assert skip_invalid, key
            continue
        assert tree.file_source(inode) == StaticFile(key)
        assert tree.path(inode) == key
    for number, grid in enumerate(references.grids):
        for index in range(min(grid.count, 3)):
            inode = walk(tree, grid.key(index))
            if inode is None or tree.is_dir(inode):
                assert skip_invalid, grid.key(index)
                continue
            # with skip_invalid, an array left out may leave its names to another one
            assert skip_invalid or tree.file_source(inode) == GridChunk(number, index)


def check_error(error: ReferenceFormatError, source: str) -> None:
    """A load error names the reference file (or a file inside it) and fits on one line."""
    assert error.source.startswith(source)
    assert str(error).startswith(error.source)
    assert "\n" not in str(error), str(error)


def check_reference(reference: object) -> None:
    match reference:
        case Inline(data):
            assert isinstance(data, bytes)
        case Range(url, offset, length):
            assert isinstance(url, str)
            assert url
            assert type(offset) is int
            assert type(length) is int
            assert offset >= 0
            assert length >= 0
            assert offset + length <= MAX_OFFSET
        case Whole(url):
            assert isinstance(url, str)
            assert url
        case None:
            pass
        case _:
            raise AssertionError(f"not a reference: {reference!r}")


def load_and_build(source: MemorySource, skip_invalid: bool, **options: Any) -> None:
    """Load and build; succeed with a valid tree or raise ``ReferenceFormatError``."""
    load_options = LoadOptions(skip_invalid=skip_invalid, **options)
    try:
        with Warnings():
            references = load(source, load_options)
            for reference in map(references.get, references.keys()):
                check_reference(reference)
            tree = Tree.build(
                references.keys(), references.grids, source=source.url, skip_invalid=skip_invalid
            )
    except ReferenceFormatError as error:
        check_error(error, source.url)
        return
    check_tree(tree, references, skip_invalid=skip_invalid)


# ----------------------------------------------------------------------------- JSON


@SETTINGS
@given(document=documents, skip_invalid=st.booleans(), target=st.none() | st.just("/t.bin"))
def test_any_json_document_loads_or_is_a_format_error(
    document: object, skip_invalid: bool, target: str | None
) -> None:
    source = MemorySource("/refs/refs.json", {"": encoded(document)})
    load_and_build(source, skip_invalid, target=target)


@SETTINGS
@given(document=documents)
def test_inline_values_are_their_bytes(document: object) -> None:
    source = MemorySource("/refs/refs.json", {"": encoded(document)})
    try:
        references = load(source, LoadOptions(skip_invalid=True))
    except ReferenceFormatError:
        return
    if not isinstance(document, dict) or "version" in document:
        return
    for key in list(references.keys()):
        reference = references.get(key)
        value = document[key]
        if isinstance(value, str) and value.startswith("base64:"):
            assert reference == Inline(base64.b64decode(value[len("base64:") :].encode()))
        elif isinstance(value, str):
            assert reference == Inline(value.encode())
        elif isinstance(value, dict):
            assert reference == Inline(json.dumps(value).encode())
        elif isinstance(value, list) and len(value) == 3:
            assert isinstance(reference, Range)
            assert (reference.offset, reference.length) == (value[1], value[2])


@SETTINGS
@given(file=file_bytes(), skip_invalid=st.booleans())
def test_any_bytes_load_or_are_a_format_error(file: tuple[str, bytes], skip_invalid: bool) -> None:
    name, data = file
    source = MemorySource(f"/refs/{name}", {"": data})
    load_and_build(source, skip_invalid)


@SETTINGS
@given(keys=st.lists(keys, max_size=10), skip_invalid=st.booleans())
def test_any_keys_build_a_tree_or_are_a_format_error(keys: list[str], skip_invalid: bool) -> None:
    document = dict.fromkeys(keys, "v")
    source = MemorySource("/refs/refs.json", {"": encoded(document)})
    load_and_build(source, skip_invalid)


# ----------------------------------------------------------------------------- Parquet

array_paths = st.sampled_from(["x", "", "g/y", "x/0", "c", "1"]) | st.sampled_from(
    ["a//b", "..", "/lead", "x" * 256, "é/" * 3]
)
int_lists = st.lists(
    st.integers(-2, 6) | st.sampled_from([2**40, 2**70]) | st.booleans() | st.text(max_size=2),
    max_size=3,
)


@st.composite
def valid_zarrays(draw: st.DrawFn) -> dict[str, object]:
    """A ``.zarray`` whose grid is valid (the array path may still be anything)."""
    dimensions = draw(st.integers(0, 2))
    shape = draw(st.lists(st.integers(0, 4), min_size=dimensions, max_size=dimensions))
    chunks = draw(st.lists(st.integers(1, 3), min_size=dimensions, max_size=dimensions))
    separator = draw(st.sampled_from([".", "/"]))
    return {"shape": shape, "chunks": chunks, "dimension_separator": separator, "zarr_format": 2}


zarrays = (
    valid_zarrays()
    | valid_zarrays()
    | st.fixed_dictionaries(
        {},
        optional={
            "shape": int_lists | json_values,
            "chunks": int_lists | json_values,
            "dimension_separator": st.sampled_from([".", "/", "-", None]) | json_values,
            "zarr_format": st.just(2),
        },
    )
)
zarr_jsons = st.fixed_dictionaries(
    {
        "node_type": st.just("array"),
        "shape": st.lists(st.integers(0, 3), min_size=2, max_size=2),
        "chunk_grid": st.just({"name": "regular", "configuration": {"chunk_shape": [1, 2]}}),
    },
    optional={"chunk_key_encoding": st.sampled_from([{"name": "default"}, {"name": "v2"}])},
) | st.fixed_dictionaries(
    {"node_type": st.sampled_from(["array", "group", "other"]) | json_values},
    optional={
        "shape": int_lists,
        "chunk_grid": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["regular", "irregular"]),
                "configuration": st.fixed_dictionaries({"chunk_shape": int_lists}) | json_values,
            }
        )
        | json_values,
        "chunk_key_encoding": st.fixed_dictionaries(
            {"name": st.sampled_from(["default", "v2", "x"]) | json_values},
            optional={
                "configuration": st.fixed_dictionaries(
                    {"separator": st.sampled_from([".", "/", ":"])}
                )
                | json_values
            },
        )
        | json_values,
    },
)


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, object]:
    out: dict[str, object] = {}
    for _ in range(draw(st.integers(0, 3))):
        array = draw(array_paths)
        prefix = f"{array}/" if array else ""
        if draw(st.booleans()):
            document: object = draw(zarrays)
            name = ".zarray"
        else:
            document = draw(zarr_jsons)
            name = "zarr.json"
        out[prefix + name] = json.dumps(document) if draw(st.booleans()) else document
    extra = draw(st.dictionaries(keys, json_values, max_size=3))
    return {**extra, **out}


zmetadata_documents = (
    st.fixed_dictionaries({"metadata": metadata(), "record_size": st.integers(1, 4)})
    | st.fixed_dictionaries({"metadata": metadata(), "record_size": st.integers(1, 4)})
    | st.fixed_dictionaries(
        {},
        optional={
            "metadata": metadata() | json_values,
            "record_size": st.integers(-2, 10) | st.sampled_from([2**70, "3", True]) | json_values,
        },
    )
    | json_values
)


def record_file(draw: st.DrawFn) -> bytes:
    """A record file: garbage, or a small table with random columns and pandas metadata."""
    if draw(st.booleans()):
        return draw(st.sampled_from([b"", b"PAR1", b"PAR1" + b"\x00" * 20 + b"PAR1"])) + draw(
            st.binary(max_size=32)
        )
    rows = draw(st.integers(0, 6))
    columns: dict[str, pa.Array[Any]] = {}
    for name in draw(
        st.lists(st.sampled_from(["path", "offset", "size", "raw", "other"]), unique=True)
    ):
        kind = draw(st.sampled_from(["string", "int", "binary", "null", "dict"]))
        if kind == "string":
            columns[name] = pa.array(
                draw(
                    st.lists(
                        st.none() | st.sampled_from(["data.bin", "", "s3://b/k"]),
                        min_size=rows,
                        max_size=rows,
                    )
                ),
                pa.string(),
            )
        elif kind == "int":
            columns[name] = pa.array(
                draw(
                    st.lists(st.none() | st.integers(-5, 2**63 - 1), min_size=rows, max_size=rows)
                ),
                pa.int64(),
            )
        elif kind == "binary":
            columns[name] = pa.array(
                draw(
                    st.lists(
                        st.none() | st.binary(max_size=8) | st.just(b"base64:!!"),
                        min_size=rows,
                        max_size=rows,
                    )
                ),
                pa.binary(),
            )
        elif kind == "dict":
            columns[name] = pa.array(
                draw(
                    st.lists(
                        st.none() | st.sampled_from(["data.bin", "x"]), min_size=rows, max_size=rows
                    )
                ),
                pa.string(),
            ).dictionary_encode()
        else:
            columns[name] = pa.nulls(rows)
    table = pa.table(columns) if columns else pa.table({"other": pa.nulls(rows)})
    pandas = draw(
        st.none()
        | st.sampled_from(
            [b"{not json", b"[1, 2]", b'{"index_columns": 5}', b'{"index_columns": ["other"]}']
        )
    )
    if pandas is not None:
        table = table.replace_schema_metadata({b"pandas": pandas})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


@st.composite
def parquet_sets(draw: st.DrawFn) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    kind = draw(st.sampled_from(["document"] * 6 + ["missing", "noise"]))
    document = draw(zmetadata_documents)
    if kind == "document":
        files[".zmetadata"] = encoded(document)
    elif kind == "noise":
        files[".zmetadata"] = draw(st.binary(max_size=20))
    for array in draw(st.lists(array_paths, max_size=2)):
        for number in draw(st.lists(st.integers(0, 1), max_size=2, unique=True)):
            name = f"refs.{number}.parq"
            files[f"{array}/{name}" if array else name] = record_file(draw)
    return files


@SETTINGS
@given(files=parquet_sets(), skip_invalid=st.booleans())
def test_any_parquet_set_loads_or_is_a_format_error(
    files: dict[str, bytes], skip_invalid: bool
) -> None:
    source = MemorySource("/refs/refs.parq", files, directory=True)
    options = LoadOptions(skip_invalid=skip_invalid, remote_protocol="file")
    try:
        with Warnings():
            references = load_parquet(source, options)
            tree = Tree.build(
                references.keys(), references.grids, source=source.url, skip_invalid=skip_invalid
            )
    except ReferenceFormatError as error:
        check_error(error, source.url)
        return
    for reference in map(references.get, references.keys()):
        check_reference(reference)
    check_tree(tree, references, skip_invalid=skip_invalid)
    for number, grid in enumerate(references.grids):
        for index in [*range(min(grid.count, 4)), grid.count - 1, grid.count]:
            try:
                check_reference(references.chunk(number, index))
            except ReferenceFormatError as error:
                check_error(error, source.url)
        try:
            present = list(references.chunks_present(number, 0, 8))
        except ReferenceFormatError as error:
            check_error(error, source.url)
        else:
            assert all(0 <= index < min(grid.count, 8) for index in present)
