// Read one zarr array from a local directory with zarrita and print it as JSON.
//
//   node read.mjs STORE_DIR ARRAY_PATH [--values]
//
// Prints {"zarrita", "shape", "chunks", "dtype", "fill_value", "attrs", "sha256", "values"?}.
// "sha256" is the SHA-256 of the whole array's elements in C order, little-endian, which
// Python computes the same way with numpy (astype("<dtype").tobytes()); "values" is the
// flattened array (NaN as null), given with --values.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import FileSystemStore from "@zarrita/storage/fs";
import * as zarr from "zarrita";

const [storeDir, arrayPath, ...flags] = process.argv.slice(2);
if (!storeDir || !arrayPath) {
  console.error("usage: node read.mjs STORE_DIR ARRAY_PATH [--values]");
  process.exit(2);
}

function zarritaVersion() {
  const manifest = new URL("./node_modules/zarrita/package.json", import.meta.url);
  return JSON.parse(readFileSync(manifest, "utf8")).version;
}

function littleEndianBytes(data) {
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const size = data.BYTES_PER_ELEMENT;
  const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  if (littleEndian || size === 1) return bytes;
  const swapped = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i += size) {
    for (let j = 0; j < size; j++) swapped[i + j] = bytes[i + size - 1 - j];
  }
  return swapped;
}

function plain(value) {
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "number" && !Number.isFinite(value)) return null;
  return value;
}

const store = new FileSystemStore(storeDir);
const location = zarr.root(store).resolve(arrayPath);
const array = await zarr.open(location, { kind: "array" });
const TYPED = {
  int8: Int8Array, int16: Int16Array, int32: Int32Array, int64: BigInt64Array,
  uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array,
  float32: Float32Array, float64: Float64Array,
};
const result = await zarr.get(array);

// zarrita hands back an F-order array (zarr v2 "order": "F") as it is stored, with its
// strides: copy it into C order, which is what the checksum and the values are taken in.
function cOrder(chunk) {
  const { data, shape, stride } = chunk;
  let expected = 1;
  const contiguous = shape.map((_, i) => shape.length - 1 - i).every((axis) => {
    const ok = shape[axis] <= 1 || stride[axis] === expected;
    expected *= shape[axis];
    return ok;
  });
  if (contiguous) return data;
  const out = new data.constructor(data.length);
  const index = new Array(shape.length).fill(0);
  for (let n = 0; n < out.length; n++) {
    let at = 0;
    for (let axis = 0; axis < shape.length; axis++) at += index[axis] * stride[axis];
    out[n] = data[at];
    for (let axis = shape.length - 1; axis >= 0; axis--) {
      if (++index[axis] < shape[axis]) break;
      index[axis] = 0;
    }
  }
  return out;
}

// A 0-d array comes back as a bare scalar: wrap it so that it hashes like any other array.
const data = array.shape.length === 0 ? TYPED[array.dtype].of(result) : cOrder(result);
const output = {
  zarrita: zarritaVersion(),
  shape: array.shape,
  chunks: array.chunks,
  dtype: array.dtype,
  fill_value: plain(array.fillValue),
  attrs: array.attrs,
  sha256: createHash("sha256").update(littleEndianBytes(data)).digest("hex"),
};
if (flags.includes("--values")) {
  output.values = Array.from(data, plain);
}
console.log(JSON.stringify(output));
